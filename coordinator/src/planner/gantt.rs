//! Text Gantt chart of a [`Plan`] for terminals and logs.

use super::Plan;

/// Rows shown by [`render`] before the rest is summarised as "… N more tasks".
pub const DEFAULT_MAX_ROWS: usize = 60;

const CRITICAL: char = '█';
const OTHER: char = '▒';
const GATE: char = '◆';
const MAX_LABEL: usize = 40;
const MAX_AGENT: usize = 24;

/// Renders `plan` with bars scaled to `width` columns (at least 10) and at
/// most [`DEFAULT_MAX_ROWS`] task rows.
pub fn render(plan: &Plan, width: usize) -> String {
    render_with(plan, width, DEFAULT_MAX_ROWS)
}

/// [`render`] with an explicit row limit.
pub fn render_with(plan: &Plan, width: usize, max_rows: usize) -> String {
    let width = width.max(10);
    let shown = &plan.tasks[..plan.tasks.len().min(max_rows)];
    let label_w = shown
        .iter()
        .map(|t| t.task_id.chars().count())
        .chain(["task".len()])
        .max()
        .unwrap_or(4)
        .min(MAX_LABEL);
    let agent_w = shown
        .iter()
        .map(|t| t.agent_type.as_deref().unwrap_or("gate").chars().count())
        .chain(["agent".len()])
        .max()
        .unwrap_or(5)
        .min(MAX_AGENT);
    let scale = if plan.makespan > 0.0 {
        width as f64 / plan.makespan
    } else {
        0.0
    };
    let col = |t: f64| ((t * scale).round().max(0.0) as usize).min(width);

    let mut out = String::new();
    let (labels, ruler) = axis(plan.makespan, width, &col);
    let pad = " ".repeat(label_w + agent_w + 4);
    // Bar cell c sits one column right of the opening `|`; ticks align to it.
    out.push_str(&format!(
        "{:<label_w$}  {:<agent_w$}   {labels}\n",
        "task", "agent"
    ));
    out.push_str(&format!("{pad} {ruler}\n"));

    let mut previous_item: Option<&str> = None;
    for task in shown {
        if previous_item.is_some_and(|p| p != task.item) {
            out.push('\n');
        }
        previous_item = Some(&task.item);
        let mut bar = vec![' '; width];
        let c0 = col(task.start);
        if task.agent_type.is_none() {
            bar[c0.min(width - 1)] = GATE;
        } else {
            let c1 = col(task.end).max(c0 + 1).min(width);
            let fill = if task.on_critical_path {
                CRITICAL
            } else {
                OTHER
            };
            for cell in bar.iter_mut().take(c1).skip(c0.min(width - 1)) {
                *cell = fill;
            }
        }
        let bar: String = bar.into_iter().collect();
        out.push_str(&format!(
            "{:<label_w$}  {:<agent_w$}  |{}|\n",
            clip(&task.task_id, label_w),
            clip(task.agent_type.as_deref().unwrap_or("gate"), agent_w),
            bar,
        ));
    }
    if plan.tasks.len() > shown.len() {
        out.push_str(&format!(
            "… {} more tasks\n",
            plan.tasks.len() - shown.len()
        ));
    }

    out.push('\n');
    out.push_str(&format!(
        "makespan: {} time units ({} tasks, {} items)\n",
        num(plan.makespan),
        plan.tasks.len(),
        plan.items.len()
    ));
    out.push_str(&format!(
        "critical path: {} (length {})\n",
        plan.critical_path.join(" → "),
        num(plan.critical_path_length)
    ));
    out.push_str(&format!(
        "parallelism: {:.2}x (sequential time {})\n",
        plan.parallelism_factor,
        num(plan.sequential_time)
    ));
    match &plan.bottleneck {
        Some(b) => {
            out.push_str(&format!(
                "bottleneck: {} (capacity {}): makespan {} → {} with one more slot",
                b.agent_type,
                b.capacity,
                num(plan.makespan),
                num(b.makespan_with_one_more_slot)
            ));
            if b.gain <= 0.0 {
                out.push_str(&format!(
                    "; tasks queued {} time units",
                    num(b.queueing_delay)
                ));
            }
            out.push('\n');
        }
        None => out.push_str("bottleneck: none (no task waits for capacity)\n"),
    }
    out.push_str(&format!(
        "legend: {CRITICAL} critical path  {OTHER} other task  {GATE} gate\n"
    ));
    out
}

/// Tick labels and a ruler for the bar area: index c is bar cell c, index
/// `width` is the closing `|`.
fn axis(makespan: f64, width: usize, col: &dyn Fn(f64) -> usize) -> (String, String) {
    let mut labels = vec![' '; width + 8];
    let mut ruler = vec!['-'; width + 1];
    let step = tick_step(makespan, width);
    let mut next_free = 0usize;
    let mut i = 0u64;
    loop {
        let t = step * i as f64;
        if t > makespan + 1e-9 || step <= 0.0 {
            break;
        }
        let c = col(t);
        ruler[c.min(width)] = '+';
        let text = num(t);
        if c >= next_free && c + text.len() <= labels.len() {
            for (k, ch) in text.chars().enumerate() {
                labels[c + k] = ch;
            }
            next_free = c + text.len() + 1;
        }
        i += 1;
    }
    if step <= 0.0 {
        labels[0] = '0';
        ruler[0] = '+';
    }
    // The closing `|` column is the end of the plan.
    ruler[width] = '+';
    (
        labels
            .into_iter()
            .collect::<String>()
            .trim_end()
            .to_string(),
        ruler.into_iter().collect::<String>(),
    )
}

/// A 1-2-5 step giving labels at least ~6 columns apart.
fn tick_step(makespan: f64, width: usize) -> f64 {
    if makespan <= 0.0 {
        return 0.0;
    }
    let max_ticks = (width / 6).max(1) as f64;
    let raw = makespan / max_ticks;
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * magnitude)
}

/// Integers without decimals, everything else with up to two.
fn num(x: f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{}", x.round() as i64)
    } else {
        let s = format!("{x:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn clip(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        s.to_string()
    } else {
        let mut c: String = s.chars().take(w.saturating_sub(1)).collect();
        c.push('…');
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_steps() {
        assert_eq!(num(9.0), "9");
        assert_eq!(num(8.5), "8.5");
        assert_eq!(num(2.225), "2.23");
        assert_eq!(tick_step(9.0, 60), 1.0);
        assert_eq!(tick_step(90.0, 60), 10.0);
        assert_eq!(tick_step(13.0, 30), 5.0);
    }
}
