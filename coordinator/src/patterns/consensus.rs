//! Consensus detection: each response's stance (explicit `I AGREE` /
//! `I DISAGREE` markers first, then negation-aware reading of the text),
//! the word overlap of the responses (Jaccard), and their combination
//! `0.7 × explicit + 0.3 × similarity`.

use std::collections::BTreeSet;

/// Weight of the explicit agreement ratio in the combined score.
pub const EXPLICIT_WEIGHT: f64 = 0.7;
/// Weight of the output similarity in the combined score.
pub const SIMILARITY_WEIGHT: f64 = 0.3;

/// The instruction appended to every consensus prompt (the seed's words).
pub const CONSENSUS_INSTRUCTION: &str = "If you agree with the consensus, clearly state 'I AGREE' at the start.\nIf you disagree, clearly state 'I DISAGREE' at the start and explain your reasoning.";

/// Words that flip the stance of an `agree` / `disagree` close after them.
const NEGATORS: &[&str] = &[
    "not",
    "no",
    "never",
    "don't",
    "dont",
    "do not",
    "doesn't",
    "doesnt",
    "didn't",
    "didnt",
    "can't",
    "cant",
    "cannot",
    "won't",
    "wont",
    "wouldn't",
    "wouldnt",
    "couldn't",
    "couldnt",
    "shouldn't",
    "shouldnt",
    "isn't",
    "aren't",
    "hardly",
    "neither",
    "nor",
];

/// How far back (in words, within one clause) a negator still applies.
const NEGATION_WINDOW: usize = 3;

// Stances and scores are recorded in a run's rounds: their types live with the API.
pub use caucus_shared::api::coordinator::patterns::Stance;

/// Reads a response's stance: a leading `I AGREE` / `I DISAGREE` marker
/// decides; otherwise the first `agree`/`disagree` in the text, flipped by
/// each negation just before it ("I don't disagree" agrees). `None` when
/// the response takes no stance.
pub fn stance(text: &str) -> Option<Stance> {
    let norm = text
        .replace(['\u{2019}', '\u{2018}', '`'], "'")
        .to_lowercase();
    let start = norm.trim_start_matches(|c: char| !c.is_alphanumeric());
    if let Some(rest) = start.strip_prefix("i agree") {
        if !rest.starts_with(|c: char| c.is_alphanumeric()) {
            return Some(Stance::Agree);
        }
    }
    if let Some(rest) = start.strip_prefix("i disagree") {
        if !rest.starts_with(|c: char| c.is_alphanumeric()) {
            return Some(Stance::Disagree);
        }
    }
    for clause in norm.split(['.', ',', ';', ':', '!', '?', '\n']) {
        let words: Vec<&str> = clause
            .split(|c: char| !(c.is_alphanumeric() || c == '\''))
            .filter(|w| !w.is_empty())
            .collect();
        for (i, w) in words.iter().enumerate() {
            let positive = match *w {
                "agree" | "agreed" | "agrees" | "concur" | "concurs" => true,
                "disagree" | "disagreed" | "disagrees" => false,
                _ => continue,
            };
            // "couldn't agree more" is emphatic agreement, not a negation.
            if positive && words.get(i + 1) == Some(&"more") {
                return Some(Stance::Agree);
            }
            let from = i.saturating_sub(NEGATION_WINDOW);
            let window = &words[from..i];
            let negations = count_negations(window);
            let agrees = positive ^ (negations % 2 == 1);
            return Some(if agrees {
                Stance::Agree
            } else {
                Stance::Disagree
            });
        }
    }
    None
}

fn count_negations(window: &[&str]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < window.len() {
        // Two-word negators ("do not") count once.
        if i + 1 < window.len() {
            let pair = format!("{} {}", window[i], window[i + 1]);
            if NEGATORS.contains(&pair.as_str()) {
                n += 1;
                i += 2;
                continue;
            }
        }
        if NEGATORS.contains(&window[i]) || window[i].ends_with("n't") {
            n += 1;
        }
        i += 1;
    }
    n
}

/// Lower-cased words of `text`, without a leading stance marker, so the
/// similarity measures what the responses say rather than the marker.
pub fn words(text: &str) -> BTreeSet<String> {
    let lower = text.to_lowercase();
    let body = lower.trim_start_matches(|c: char| !c.is_alphanumeric());
    let body = body
        .strip_prefix("i disagree")
        .or_else(|| body.strip_prefix("i agree"))
        .unwrap_or(body);
    body.split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// |A ∩ B| / |A ∪ B|; two empty sets are identical (1.0).
pub fn jaccard(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    let union = a.union(b).count();
    if union == 0 {
        return 1.0;
    }
    a.intersection(b).count() as f64 / union as f64
}

/// Mean Jaccard similarity over every pair of `texts`; one text is
/// trivially similar to itself (1.0), none gives 0.0.
pub fn mean_similarity(texts: &[&str]) -> f64 {
    match texts.len() {
        0 => 0.0,
        1 => 1.0,
        n => {
            let sets: Vec<BTreeSet<String>> = texts.iter().map(|t| words(t)).collect();
            let mut sum = 0.0;
            for i in 0..n {
                for j in i + 1..n {
                    sum += jaccard(&sets[i], &sets[j]);
                }
            }
            sum / (n * (n - 1) / 2) as f64
        }
    }
}

pub use caucus_shared::api::coordinator::patterns::ConsensusScore;

/// Scores one round: `responses` holds one entry per agent, `None` for an
/// agent that failed.
pub fn score(responses: &[Option<&str>], threshold: f64) -> ConsensusScore {
    let ok: Vec<&str> = responses.iter().flatten().copied().collect();
    let stances: Vec<Option<Stance>> = ok.iter().map(|t| stance(t)).collect();
    let agreed = stances
        .iter()
        .filter(|s| **s == Some(Stance::Agree))
        .count();
    let disagreed = stances
        .iter()
        .filter(|s| **s == Some(Stance::Disagree))
        .count();
    let explicit = if responses.is_empty() {
        0.0
    } else {
        agreed as f64 / responses.len() as f64
    };
    let similarity = mean_similarity(&ok);
    let combined = EXPLICIT_WEIGHT * explicit + SIMILARITY_WEIGHT * similarity;
    ConsensusScore {
        explicit,
        similarity,
        combined,
        threshold,
        // A hair of slack so 0.7 + 0.3 × 1/3 style sums are not lost to rounding.
        reached: combined + 1e-9 >= threshold,
        agreed,
        disagreed,
        no_stance: ok.len() - agreed - disagreed,
        agents: responses.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negation_table() {
        use Stance::*;
        let table: &[(&str, Option<Stance>)] = &[
            ("I AGREE. The query is parameterised.", Some(Agree)),
            (
                "I DISAGREE: string concatenation is unsafe.",
                Some(Disagree),
            ),
            ("**I agree** with the others", Some(Agree)),
            ("I agree", Some(Agree)),
            ("I disagree", Some(Disagree)),
            ("I don't agree", Some(Disagree)),
            ("I do not agree with that", Some(Disagree)),
            ("I don't disagree", Some(Agree)),
            ("I do not disagree with the plan", Some(Agree)),
            ("I can't agree with this", Some(Disagree)),
            ("I never disagreed", Some(Agree)),
            ("Honestly, I couldn't agree more", Some(Agree)),
            ("I don\u{2019}t agree", Some(Disagree)),
            ("We agree on the approach", Some(Agree)),
            ("After review, we disagree strongly", Some(Disagree)),
            ("Not sure. I agree with the first point", Some(Agree)),
            ("I agreeably note the result", None),
            ("The query is safe.", None),
            ("", None),
        ];
        for (text, want) in table {
            assert_eq!(stance(text), *want, "{text:?}");
        }
    }

    #[test]
    fn jaccard_of_word_sets() {
        let a = words("the cat sat");
        let b = words("The cat ran");
        assert!((jaccard(&a, &b) - 0.5).abs() < 1e-12);
        assert_eq!(mean_similarity(&["x y", "x y", "x y"]), 1.0);
        assert_eq!(mean_similarity(&["a", "b"]), 0.0);
        // Markers are not content.
        assert_eq!(mean_similarity(&["I AGREE. safe", "I DISAGREE: safe"]), 1.0);
    }

    #[test]
    fn combined_score_and_threshold() {
        let same = "I AGREE. The query uses bound parameters so it is safe";
        let s = score(&[Some(same), Some(same), Some(same)], 0.8);
        assert_eq!((s.explicit, s.similarity), (1.0, 1.0));
        assert!(s.reached);
        // Two of three agree, texts identical: 0.7 × 2/3 + 0.3 = 0.7667 < 0.8.
        let no = "I DISAGREE. The query uses bound parameters so it is safe";
        let s = score(&[Some(same), Some(same), Some(no)], 0.8);
        assert!((s.combined - (0.7 * 2.0 / 3.0 + 0.3)).abs() < 1e-12);
        assert!(!s.reached);
        assert_eq!((s.agreed, s.disagreed), (2, 1));
        // A failed agent has not agreed.
        let s = score(&[Some(same), Some(same), None], 0.7);
        assert!((s.explicit - 2.0 / 3.0).abs() < 1e-12);
        assert!(s.reached, "{s:?}");
        assert_eq!(s.agents, 3);
    }
}
