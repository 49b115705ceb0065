//! The scaffolding every caucus binary shares: connect (with retry), set up
//! the topology, serve the control API, announce readiness, run the body,
//! and drain on SIGTERM/SIGINT.
//!
//! ```text
//! let mut svc = Service::start("coordinator", config).await?;  // NATS, Redis, streams (or wait for them)
//! svc.route("status", |req| async move { ... });               // extra API routes
//! let exit = svc.run(body).await?;                              // "service ready", body, drain
//! ```
//!
//! Shutdown: the first signal cancels [`ServiceContext::shutdown`]; the body
//! and every task in [`ServiceContext::tasks`] get `config.shutdown_grace`
//! to finish. A second signal exits the process at once with code 130.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use async_nats::jetstream;
use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;

use crate::clock::{SharedClock, SystemClock};
use crate::health::{self, Health};
use crate::nats::bind::{self, BindBudget};
use crate::nats::role::TopologyRole;
use crate::nats::{self, ApiError, ApiServer, Dlq};
use crate::redis::{self as credis, redact_url, RedisPool};
use crate::subjects::Subjects;
use crate::{Config, Error};

mod main;
mod tasks;

pub use main::{boot, exit_code, run_main, CONFIG_EXIT_CODE};
pub use tasks::{panic_message, Tasks, RUNTIME};

/// Exit code after a second signal.
pub const FORCED_EXIT_CODE: i32 = 130;

/// Everything a service body needs; cheap to clone.
#[derive(Clone)]
pub struct ServiceContext {
    /// Service name as used in API subjects (`worker`, `coordinator`, …).
    pub service: String,
    /// Unique id of this process (`<service>-<12 hex>`).
    pub instance_id: String,
    /// The effective configuration.
    pub config: Arc<Config>,
    /// Subject builders under `config.subject_prefix`.
    pub subjects: Subjects,
    /// The NATS connection (reconnects by itself).
    pub nats: async_nats::Client,
    /// JetStream on that connection.
    pub js: jetstream::Context,
    /// The Redis pool.
    pub redis: RedisPool,
    /// Dead-letter publisher shared by every consuming loop.
    pub dlq: Dlq,
    /// Cancelled on the first SIGTERM/SIGINT: stop taking new work.
    pub shutdown: CancellationToken,
    /// Spawn in-flight work here (`ctx.tasks.spawn_named(..)`) so shutdown
    /// waits for it and a panic marks health degraded.
    pub tasks: Tasks,
    /// Wall-clock time.
    pub clock: SharedClock,
    /// What `health` reports: the service probes NATS and Redis itself;
    /// loops that depend on them (leadership, heartbeats) mark their own
    /// component.
    pub health: Health,
}

impl std::fmt::Debug for ServiceContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceContext")
            .field("service", &self.service)
            .field("instance_id", &self.instance_id)
            .finish_non_exhaustive()
    }
}

/// How a service ended (a second signal never returns: it exits with 130).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// Asked to stop, and everything in flight finished within the grace.
    Drained,
    /// Asked to stop, but work was still running when the grace ran out
    /// (it is redelivered to another instance).
    GraceExpired {
        /// Tracked tasks still running.
        in_flight: usize,
    },
    /// The body returned an error or panicked.
    Failed(String),
}

impl Exit {
    /// Process exit code: 0 for a clean drain, 1 otherwise.
    pub fn code(&self) -> i32 {
        match self {
            Exit::Drained => 0,
            Exit::GraceExpired { .. } | Exit::Failed(_) => 1,
        }
    }
}

/// A connected service that is not yet serving or ready.
pub struct Service {
    ctx: ServiceContext,
    api: ApiServer,
    started: Instant,
    /// Routes the service adds to its HTTP listener (`/metrics` and
    /// `/healthz` are always there when `telemetry.metrics_addr` is set).
    http: axum::Router,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("ctx", &self.ctx)
            .field("api", &self.api)
            .finish()
    }
}

impl Service {
    /// Connects to NATS, then Redis (each retried per config; failure is
    /// [`Error::Unreachable`] naming the server and URL), then, as
    /// [`TopologyRole::of`] the service says, creates or updates every
    /// stream (the coordinator) or waits for them to exist (worker,
    /// facilitator, correlator: see [`bind::streams`]). Telemetry must
    /// already be initialised.
    pub async fn start(service: &str, config: Config) -> Result<Service, Error> {
        let started = Instant::now();
        let instance_id = format!(
            "{service}-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        let subjects = Subjects::new(config.subject_prefix.clone());
        tracing::info!(service, instance_id, nats = %nats::redacted_urls(&config.nats.url), "connecting to NATS");
        let client = nats::connect(&config.nats, &format!("caucus-{instance_id}")).await?;
        tracing::info!(service, redis = %redact_url(&config.redis.url), "connecting to Redis");
        let redis = credis::connect(&config.redis).await?;
        let js = jetstream::new(client.clone());
        match TopologyRole::of(service) {
            TopologyRole::Administer => nats::ensure_streams(&js, &subjects, &config).await?,
            // Its NATS user may not create streams: wait for the
            // coordinator (or `caucus init`) to.
            TopologyRole::Bind => {
                bind::streams(&js, &subjects, BindBudget::from_config(&config.nats)).await?
            }
        }
        let health = Health::new();
        let tasks = Tasks::new(health.clone());
        let api = ApiServer::new(client.clone(), subjects.clone(), service)
            .with_instance_id(instance_id.clone())
            .with_health(health.clone())
            .with_require_identity(config.security.require_identity);
        let ctx = ServiceContext {
            service: service.to_string(),
            instance_id,
            dlq: Dlq::new(js.clone(), subjects.clone()),
            config: Arc::new(config),
            subjects,
            nats: client,
            js,
            redis,
            shutdown: CancellationToken::new(),
            tasks,
            clock: Arc::new(SystemClock),
            health,
        };
        Ok(Service {
            ctx,
            api,
            started,
            http: axum::Router::new(),
        })
    }

    /// Adds `routes` to the HTTP listener at `telemetry.metrics_addr`
    /// (served only when that is set).
    pub fn http_routes(&mut self, routes: axum::Router) -> &mut Self {
        self.http = std::mem::take(&mut self.http).merge(routes);
        self
    }

    /// The context the body will get (for set-up before [`Service::run`]).
    pub fn context(&self) -> &ServiceContext {
        &self.ctx
    }

    /// Adds an API operation on `caucus.api.<service>.<operation>`.
    pub fn route<F, Fut>(&mut self, operation: &str, handler: F) -> &mut Self
    where
        F: Fn(serde_json::Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<serde_json::Value, ApiError>> + Send + 'static,
    {
        self.api.route(operation, handler);
        self
    }

    /// Adds the typed operation `O` (see [`ApiServer::op`]).
    pub fn op<O, F, Fut>(&mut self, handler: F) -> &mut Self
    where
        O: crate::api::Operation,
        F: Fn(O::Request) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O::Reply, ApiError>> + Send + 'static,
    {
        self.api.op::<O, F, Fut>(handler);
        self
    }

    /// Serves the API, logs `service ready`, runs `body` and handles
    /// signals until the body and all tracked tasks are done.
    pub async fn run<F, Fut, E>(self, body: F) -> Result<Exit, Error>
    where
        F: FnOnce(ServiceContext) -> Fut,
        Fut: Future<Output = Result<(), E>> + Send + 'static,
        E: std::fmt::Display + Send + 'static,
    {
        let Service {
            ctx,
            api,
            started,
            http,
        } = self;
        let mut signals = Signals::install()?;
        api.start(ctx.shutdown.clone(), ctx.tasks.tracker()).await?;
        if let Some(addr) = ctx.config.telemetry.metrics_addr.as_deref() {
            let app = crate::telemetry::http::router(ctx.health.clone(), http);
            let bound = crate::telemetry::http::serve(addr, app, ctx.shutdown.clone()).await?;
            tracing::info!(service = %ctx.service, addr = %bound, "serving /metrics");
        }
        tracing::info!(
            service = %ctx.service,
            instance_id = %ctx.instance_id,
            nats = %nats::redacted_urls(&ctx.config.nats.url),
            redis = %redact_url(&ctx.config.redis.url),
            startup_ms = started.elapsed().as_millis() as u64,
            "service ready"
        );
        // Not in `ctx.tasks`: the probe ends with the process (aborted
        // below, after the drain), and the body is awaited here, its panic
        // becoming `Exit::Failed`.
        let probe = tokio::spawn(probe(
            ctx.nats.clone(),
            Some(ctx.redis.clone()),
            ctx.health.clone(),
            ctx.shutdown.clone(),
        ));
        let mut body = tokio::spawn(body(ctx.clone()));
        let mut outcome: Option<Exit> = None;
        tokio::select! {
            name = signals.next() => {
                tracing::info!(signal = name, grace = ?ctx.config.shutdown_grace, "shutting down; send the signal again to exit at once");
            }
            r = &mut body => outcome = Some(body_outcome(r)),
        }
        // A second signal ends the process at once, whatever is in flight;
        // untracked, since the drain must not wait for it.
        let forced = tokio::spawn(async move {
            let name = signals.next().await;
            eprintln!("{name} received again: exiting now");
            std::process::exit(FORCED_EXIT_CODE);
        });
        ctx.shutdown.cancel();
        ctx.tasks.close();
        let drain = async {
            let body_done = match outcome.take() {
                Some(o) => o,
                None => body_outcome((&mut body).await),
            };
            ctx.tasks.wait().await;
            body_done
        };
        let exit = match tokio::time::timeout(ctx.config.shutdown_grace, drain).await {
            Ok(o) => o,
            Err(_) => {
                body.abort();
                Exit::GraceExpired {
                    in_flight: ctx.tasks.len(),
                }
            }
        };
        match &exit {
            Exit::Drained => tracing::info!(service = %ctx.service, "drained; bye"),
            Exit::GraceExpired { in_flight } => tracing::warn!(
                service = %ctx.service, in_flight, grace = ?ctx.config.shutdown_grace,
                "shutdown grace expired with work in flight"
            ),
            Exit::Failed(e) => {
                tracing::error!(service = %ctx.service, error = %e, "service failed")
            }
        }
        if let Err(e) = ctx.nats.flush().await {
            tracing::debug!(error = %e, "final NATS flush failed");
        }
        forced.abort();
        probe.abort();
        Ok(exit)
    }
}

/// How often [`probe`] checks NATS and Redis.
const PROBE_EVERY: std::time::Duration = std::time::Duration::from_millis(500);
/// How long Redis may take to answer the probe's `PING`.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// Marks [`health::NATS`] and [`health::REDIS`] degraded while the NATS
/// connection is down or Redis (when the process uses it) does not answer
/// a `PING` within [`PROBE_TIMEOUT`]; logs each change once. Every
/// [`Service`] runs it; the console, which has no Redis, runs it with
/// `redis: None`.
pub async fn probe(
    nats: async_nats::Client,
    redis: Option<RedisPool>,
    health: Health,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(PROBE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        match nats.connection_state() {
            async_nats::connection::State::Connected => {
                if health.ok(health::NATS) {
                    tracing::info!("NATS reachable again");
                }
            }
            state => {
                let why = format!("NATS unreachable (connection {state})");
                if health.degraded(health::NATS, why.clone()) {
                    tracing::warn!(reason = %why, "health degraded");
                }
            }
        }
        let Some(redis) = &redis else { continue };
        let ping = tokio::time::timeout(PROBE_TIMEOUT, credis::ping(redis)).await;
        let failure = match ping {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!("no answer to PING within {PROBE_TIMEOUT:?}")),
        };
        match failure {
            None => {
                if health.ok(health::REDIS) {
                    tracing::info!("Redis reachable again");
                }
            }
            Some(e) => {
                let why = format!("Redis unreachable: {e}");
                if health.degraded(health::REDIS, why.clone()) {
                    tracing::warn!(reason = %why, "health degraded");
                }
            }
        }
    }
}

fn body_outcome<E: std::fmt::Display>(r: Result<Result<(), E>, tokio::task::JoinError>) -> Exit {
    match r {
        Ok(Ok(())) => Exit::Drained,
        Ok(Err(e)) => Exit::Failed(e.to_string()),
        Err(e) if e.is_panic() => Exit::Failed("the service body panicked".into()),
        Err(e) => Exit::Failed(format!("the service body was cancelled: {e}")),
    }
}

/// [`Service::start`] then [`Service::run`] with no extra routes.
pub async fn run_service<F, Fut, E>(service: &str, config: Config, body: F) -> Result<Exit, Error>
where
    F: FnOnce(ServiceContext) -> Fut,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    Service::start(service, config).await?.run(body).await
}

/// SIGTERM and SIGINT, as every caucus process drains on them (a second
/// one exits at once).
pub struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers.
    pub fn install() -> Result<Signals, Error> {
        let install = |k: SignalKind| signal(k).map_err(Error::Signals);
        Ok(Signals {
            term: install(SignalKind::terminate())?,
            int: install(SignalKind::interrupt())?,
        })
    }

    /// The next signal's name.
    pub async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}
