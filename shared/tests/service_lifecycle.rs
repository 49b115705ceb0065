//! The service scaffolding's lifecycle: SIGTERM drains tracked work, the
//! grace period bounds the drain, a failing body is reported, and a second
//! signal exits at once with 130 (checked in a child process, since it ends
//! the process).

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use caucus_harness::{wait_until, Stack};
use caucus_shared::nats::api_request;
use caucus_shared::service::{Exit, Service, ServiceContext};
use caucus_shared::Config;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::json;
use tokio::sync::oneshot;

const CHILD_ENV: &str = "CAUCUS_TEST_SERVICE_CHILD";

fn config(stack: &Stack, grace: Duration) -> Config {
    let mut cfg = Config::default();
    cfg.nats.url = stack.nats.url();
    cfg.redis.url = stack.redis.url();
    cfg.shutdown_grace = grace;
    cfg
}

fn sigterm_self() {
    kill(Pid::this(), Signal::SIGTERM).expect("signal self");
}

/// Runs `svc` with a body that spawns `work` as tracked work and reports
/// when it is running; returns the outcome after a SIGTERM.
async fn run_and_terminate<W>(svc: Service, work: W) -> anyhow::Result<Exit>
where
    W: FnOnce(ServiceContext) -> tokio::task::JoinHandle<()> + Send + 'static,
{
    let (started_tx, started_rx) = oneshot::channel();
    let run = tokio::spawn(svc.run(move |ctx: ServiceContext| async move {
        work(ctx.clone());
        let _ = started_tx.send(());
        ctx.shutdown.cancelled().await;
        Ok::<(), std::convert::Infallible>(())
    }));
    started_rx.await?;
    sigterm_self();
    Ok(run.await??)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_tracked_work_within_the_grace() -> anyhow::Result<()> {
    let stack = Stack::start();

    // 1. Tracked work that finishes after shutdown is waited for.
    let mut svc = Service::start("lifecycle", config(&stack, Duration::from_secs(20))).await?;
    svc.route("ping", |_| async { Ok(json!("pong")) });
    let client = svc.context().nats.clone();
    let subjects = svc.context().subjects.clone();
    let finished = Arc::new(AtomicBool::new(false));
    let flag = finished.clone();
    let (ready_tx, ready_rx) = oneshot::channel::<()>();
    let run = tokio::spawn(svc.run(move |ctx: ServiceContext| async move {
        let shutdown = ctx.shutdown.clone();
        ctx.tasks.spawn(async move {
            shutdown.cancelled().await;
            // Work still finishing after the signal, e.g. acking a task.
            tokio::time::sleep(Duration::from_millis(300)).await;
            flag.store(true, Ordering::SeqCst);
        });
        let _ = ready_tx.send(());
        ctx.shutdown.cancelled().await;
        Ok::<(), std::convert::Infallible>(())
    }));
    ready_rx.await?;
    let pong = api_request(
        &client,
        &subjects,
        "lifecycle",
        "ping",
        &json!(null),
        Duration::from_secs(5),
    )
    .await?;
    assert_eq!(pong, json!("pong"));
    sigterm_self();
    assert_eq!(run.await??, Exit::Drained);
    assert!(
        finished.load(Ordering::SeqCst),
        "returned before tracked work finished"
    );

    // 2. Work that never finishes is abandoned when the grace runs out.
    let svc = Service::start("lifecycle", config(&stack, Duration::from_millis(300))).await?;
    let exit = run_and_terminate(svc, |ctx| ctx.tasks.spawn(std::future::pending::<()>())).await?;
    assert_eq!(exit, Exit::GraceExpired { in_flight: 1 });
    assert_eq!(exit.code(), 1);

    // 3. A failing body is reported and ends the service without a signal.
    let svc = Service::start("lifecycle", config(&stack, Duration::from_secs(5))).await?;
    let exit = svc
        .run(|_ctx| async { Err::<(), _>("lost the leadership lease store") })
        .await?;
    assert_eq!(exit, Exit::Failed("lost the leadership lease store".into()));
    Ok(())
}

/// The child half of [`a_second_signal_exits_at_once_with_130`].
async fn child() -> anyhow::Result<()> {
    let cfg: Config = caucus_shared::config::ConfigLoader::new()
        .env_from_process()
        .load()?;
    let svc = Service::start("lifecycle-child", cfg).await?;
    svc.run(|ctx: ServiceContext| async move {
        ctx.tasks.spawn(std::future::pending::<()>());
        println!("service ready (child body running)");
        ctx.shutdown.cancelled().await;
        println!("child: shutdown requested");
        Ok::<(), std::convert::Infallible>(())
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_exits_at_once_with_130() -> anyhow::Result<()> {
    if std::env::var_os(CHILD_ENV).is_some() {
        return child().await;
    }
    let stack = Stack::start();
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("child.log");
    let out = std::fs::File::create(&log)?;
    let mut child = Command::new(std::env::current_exe()?)
        .args([
            "--exact",
            "a_second_signal_exits_at_once_with_130",
            "--nocapture",
        ])
        .env(CHILD_ENV, "1")
        .env("CAUCUS_NATS_URL", stack.nats.url())
        .env("CAUCUS_REDIS_URL", stack.redis.url())
        .env("CAUCUS_SHUTDOWN_GRACE", "5m")
        .stdout(Stdio::from(out.try_clone()?))
        .stderr(Stdio::from(out))
        .spawn()?;
    let pid = Pid::from_raw(child.id() as i32);
    let output = || std::fs::read_to_string(&log).unwrap_or_default();
    wait_until("child ready", Duration::from_secs(30), || {
        output().contains("child body running").then_some(())
    });
    kill(pid, Signal::SIGTERM)?;
    wait_until("child draining", Duration::from_secs(10), || {
        output().contains("shutdown requested").then_some(())
    });
    // Still running: its tracked work never finishes and the grace is 5m.
    assert!(child.try_wait()?.is_none(), "{}", output());
    kill(pid, Signal::SIGTERM)?;
    let status = wait_until("child exit", Duration::from_secs(10), || {
        child.try_wait().ok().flatten()
    });
    assert_eq!(status.code(), Some(130), "{}", output());
    Ok(())
}
