//! `dra-ledger admin`: the admin API of a running `dra-ledger run` or `demo` from the command
//! line, for SREs. Each subcommand is one request (`claims` follows the paging tokens); the
//! answer is printed as an aligned table like `kubectl get`, or with `-o json` as the server's
//! JSON; the replica whose ledger answered (and the standby that forwarded the request to it)
//! is printed on stderr, so that stdout stays the answer alone. Errors (unreachable server,
//! 4xx/5xx with the server's message and the replica that answered) exit 1.
//!
//! - [`client`]: the HTTP client; [`render`]: the tables; [`table`](mod@table): alignment and ages;
//!   [`history`]: the paths and tables of `usage`, `history` and `idle`.
//!
//! Talks to the server only over HTTP; it does not open the ledger.

mod client;
mod history;
mod render;
mod table;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use http::Method;

use client::encode;
pub use client::{AdminClient, AnsweredBy};

/// Page size `admin claims` asks for while following the paging tokens.
const CLAIMS_PAGE: usize = 500;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Aligned columns.
    Table,
    /// The server's JSON, pretty-printed.
    Json,
    /// Comma-separated values with a header line (`usage` only).
    Csv,
}

/// Flags of `dra-ledger admin`.
#[derive(Debug, Clone, clap::Args)]
pub struct AdminArgs {
    /// The admin server of `dra-ledger run` or `demo` (or of `dra-ledger node` for `prepared`).
    #[arg(
        long,
        global = true,
        env = "DRA_LEDGER_SERVER",
        default_value = "http://127.0.0.1:8080",
        value_name = "URL"
    )]
    pub server: String,

    /// File holding the admin bearer token (needed by cordon, uncordon, reconcile and backup).
    #[arg(
        long,
        global = true,
        env = "DRA_LEDGER_TOKEN_FILE",
        value_name = "PATH"
    )]
    pub token_file: Option<PathBuf>,

    /// Output format.
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,

    /// What to show or do.
    #[command(subcommand)]
    pub command: AdminCommand,
}

/// The admin subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum AdminCommand {
    /// Device counts per node, and where a node has partitions or shared GPUs its whole-GPU
    /// equivalents and capacity (`gpu-eq`, `capacity`) allocated of total.
    Nodes,
    /// The devices of a node with their state, attributes and consumer claims.
    Devices {
        /// The node.
        node: String,
    },
    /// The ledger's allocations by claim UID.
    Claims {
        /// Only this namespace.
        #[arg(long, short = 'n')]
        namespace: Option<String>,
        /// Only this node.
        #[arg(long)]
        node: Option<String>,
        /// Show one page of at most N claims (the next page's token is printed on stderr).
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// Continue a listing with the token of the previous page.
        #[arg(long = "continue", value_name = "TOKEN", requires = "limit")]
        continue_token: Option<String>,
    },
    /// One claim's allocation and intent history.
    Claim {
        /// The claim UID.
        uid: String,
    },
    /// Allocations not yet confirmed in the cluster.
    Intents,
    /// The audit log.
    Audit {
        /// Only entries after this sequence number.
        #[arg(long, default_value_t = 0)]
        since: u64,
        /// At most this many entries (1 to 1000).
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Device totals and the breakdown per attribute value.
    Utilisation,
    /// Device usage over a window: device-hours, claims and the peak of devices held at once
    /// per namespace, node, model or claim (shares weighted by their fraction). Without a
    /// window, the last 24 hours. Also `-o csv`. Intervals older than `run`'s
    /// --history-rollup-after (7 days) are kept as hourly totals: they count by whole hours
    /// (an hour counts when it starts inside the window) and `--by claim` does not list them.
    Usage {
        /// The window from this long ago until now, e.g. 7d, 12h or 90m.
        #[arg(long, value_parser = crate::cli::parse_duration, value_name = "DURATION",
            conflicts_with_all = ["from", "to"])]
        since: Option<Duration>,
        /// The window's start, RFC 3339 (e.g. 2026-01-01T00:00:00Z); with --to.
        #[arg(long, value_name = "TIME", requires = "to")]
        from: Option<String>,
        /// The window's end (excluded), RFC 3339; with --from.
        #[arg(long, value_name = "TIME", requires = "from")]
        to: Option<String>,
        /// What the rows are.
        #[arg(long, value_enum, default_value_t = history::By::Namespace)]
        by: history::By,
    },
    /// The holders of a device and its events (cordon, uncordon, health, ...) over the last
    /// 24 hours, oldest first; with --at, the claim that held it at that time. Holders that
    /// ended longer ago than `run`'s --history-rollup-after (7 days) are rolled up into hourly
    /// usage totals and no longer listed.
    History {
        /// The device, as NODE/DEVICE.
        #[arg(value_name = "NODE/DEVICE")]
        device: String,
        /// Who held the device at this time, RFC 3339 (e.g. 2026-01-01T12:00:00Z).
        #[arg(long, value_name = "TIME")]
        at: Option<String>,
    },
    /// The allocated claims no pod has used for longer than --for (status.reservedFor empty:
    /// their pods finished or are gone, or none ever used them), longest idle first, with
    /// node, devices and since when. The leader notes when it first saw each claim unused, so
    /// after a restart or a change of leader the times start again from then.
    Idle {
        /// How long a claim must have been unused to be listed, e.g. 90s, 10m or 1h.
        #[arg(long = "for", value_parser = crate::cli::parse_duration, value_name = "DURATION",
            default_value = "10m")]
        idle_for: Duration,
    },
    /// Take a device out of allocation (existing consumers keep it); on resource.k8s.io/v1
    /// clusters through a DeviceTaintRule (NoSchedule, key DRIVER/cordoned).
    Cordon {
        /// The node.
        node: String,
        /// The device.
        device: String,
    },
    /// Put a cordoned device back into allocation (deletes its DeviceTaintRule on v1).
    Uncordon {
        /// The node.
        node: String,
        /// The device.
        device: String,
    },
    /// The claims a node agent prepared, with their devices and CDI device IDs (`--server`
    /// is the agent's admin address, e.g. http://NODE:8081).
    Prepared,
    /// Reconcile the ledger against the cluster now and show the drift report.
    Reconcile,
    /// Download a consistent copy of the ledger file.
    Backup {
        /// Destination file (must not exist).
        #[arg(long, value_name = "FILE")]
        to: PathBuf,
    },
}

/// Runs one admin subcommand, printing its answer on stdout.
pub fn execute(args: &AdminArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let (text, by) = runtime.block_on(answer(args))?;
    print!("{text}");
    if let Some(by) = by.describe() {
        eprintln!("{by}");
    }
    Ok(ExitCode::SUCCESS)
}

fn pretty(json: &serde_json::Value) -> String {
    format!(
        "{}\n",
        serde_json::to_string_pretty(json).unwrap_or_default()
    )
}

/// The method and path of a subcommand that is one request; an error for bad flag values.
fn request(command: &AdminCommand) -> anyhow::Result<Option<(Method, String)>> {
    Ok(Some(match command {
        AdminCommand::Nodes => (Method::GET, "/v1/nodes".to_owned()),
        AdminCommand::Devices { node } => {
            (Method::GET, format!("/v1/nodes/{}/devices", encode(node)))
        }
        AdminCommand::Claim { uid } => (Method::GET, format!("/v1/claims/{}", encode(uid))),
        AdminCommand::Intents => (Method::GET, "/v1/intents".to_owned()),
        AdminCommand::Audit { since, limit } => (
            Method::GET,
            format!("/v1/audit?since={since}&limit={limit}"),
        ),
        AdminCommand::Utilisation => (Method::GET, "/v1/utilisation".to_owned()),
        AdminCommand::Usage {
            since,
            from,
            to,
            by,
        } => (
            Method::GET,
            history::usage_path(
                *since,
                from.as_deref(),
                to.as_deref(),
                *by,
                chrono::Utc::now(),
            )?,
        ),
        AdminCommand::History { device, at } => {
            (Method::GET, history::history_path(device, at.as_deref())?)
        }
        AdminCommand::Idle { idle_for } => (
            Method::GET,
            format!("/v1/idle?for={}ms", idle_for.as_millis()),
        ),
        AdminCommand::Cordon { node, device } => (
            Method::POST,
            format!(
                "/v1/nodes/{}/devices/{}/cordon",
                encode(node),
                encode(device)
            ),
        ),
        AdminCommand::Uncordon { node, device } => (
            Method::POST,
            format!(
                "/v1/nodes/{}/devices/{}/uncordon",
                encode(node),
                encode(device)
            ),
        ),
        AdminCommand::Reconcile => (Method::POST, "/v1/reconcile".to_owned()),
        AdminCommand::Prepared => (Method::GET, "/v1/prepared".to_owned()),
        AdminCommand::Claims { .. } | AdminCommand::Backup { .. } => return Ok(None),
    }))
}

/// The table of the answer to a one-request subcommand.
fn table(command: &AdminCommand, answer: serde_json::Value) -> anyhow::Result<String> {
    Ok(match command {
        AdminCommand::Nodes => render::nodes(&render::decode(answer)?),
        AdminCommand::Devices { .. } => render::devices(&render::decode(answer)?),
        AdminCommand::Claim { .. } => render::claim(&render::decode(answer)?),
        AdminCommand::Intents => render::intents(&render::decode(answer)?),
        AdminCommand::Audit { .. } => render::audit(&render::decode(answer)?),
        AdminCommand::Utilisation => render::utilisation(&render::decode(answer)?),
        AdminCommand::Usage { .. } => history::usage_table(&render::decode(answer)?),
        AdminCommand::Idle { .. } => history::idle_table(&render::decode(answer)?),
        AdminCommand::History { device, at } => {
            history::history_table(device, at.as_deref(), &render::decode(answer)?)
        }
        AdminCommand::Prepared => render::prepared(&render::decode(answer)?),
        AdminCommand::Cordon { .. } | AdminCommand::Uncordon { .. } => {
            render::cordon(&render::decode(answer)?)
        }
        AdminCommand::Reconcile | AdminCommand::Claims { .. } | AdminCommand::Backup { .. } => {
            render::report(&answer)
        }
    })
}

/// The text to print for `args`, and the replica that answered.
async fn answer(args: &AdminArgs) -> anyhow::Result<(String, AnsweredBy)> {
    let client = AdminClient::new(&args.server, args.token_file.as_deref())?;
    let usage = matches!(args.command, AdminCommand::Usage { .. });
    if args.output == Output::Csv && !usage {
        anyhow::bail!("-o csv is only for `admin usage`; use -o table or -o json");
    }
    let json = args.output == Output::Json;
    if let Some((method, path)) = request(&args.command)? {
        let (answer, by) = client.json(method, &path).await?;
        let text = match args.output {
            Output::Json => pretty(&answer),
            Output::Csv => history::usage_csv(&render::decode(answer)?),
            Output::Table => table(&args.command, answer)?,
        };
        return Ok((text, by));
    }
    match &args.command {
        AdminCommand::Claims {
            namespace,
            node,
            limit,
            continue_token,
        } => {
            let filters = Filters {
                namespace: namespace.as_deref(),
                node: node.as_deref(),
            };
            claims(&client, filters, *limit, continue_token.as_deref(), json).await
        }
        AdminCommand::Backup { to } => {
            let (bytes, by) = client.backup(to).await?;
            let text = if json {
                pretty(&serde_json::json!({"path": to, "bytes": bytes}))
            } else {
                format!("wrote {bytes} bytes to {}\n", to.display())
            };
            Ok((text, by))
        }
        _ => unreachable!("every other subcommand is one request"),
    }
}

/// The filters of `admin claims`.
#[derive(Debug, Clone, Copy)]
struct Filters<'a> {
    namespace: Option<&'a str>,
    node: Option<&'a str>,
}

/// `admin claims`: one page with `--limit`, else every page; and the replica that answered
/// (the last page's: a listing that a takeover interrupts fails with 410 instead of mixing
/// ledgers).
async fn claims(
    client: &AdminClient,
    filters: Filters<'_>,
    limit: Option<usize>,
    continue_token: Option<&str>,
    json: bool,
) -> anyhow::Result<(String, AnsweredBy)> {
    let mut query = String::new();
    if let Some(namespace) = filters.namespace {
        query = format!("{query}&namespace={}", encode(namespace));
    }
    if let Some(node) = filters.node {
        query = format!("{query}&node={}", encode(node));
    }
    let mut items = Vec::new();
    let mut admin_access = Vec::new();
    let mut by;
    let mut token = continue_token.map(str::to_owned);
    loop {
        let mut path = format!("/v1/claims?limit={}{query}", limit.unwrap_or(CLAIMS_PAGE));
        if let Some(token) = &token {
            path = format!("{path}&continue={}", encode(token));
        }
        let (page, answered) = client.json(Method::GET, &path).await?;
        by = answered;
        if limit.is_some() {
            if let Some(next) = page["continue"].as_str() {
                eprintln!(
                    "more claims: --limit {} --continue {next}",
                    limit.unwrap_or_default()
                );
            }
            if json {
                return Ok((pretty(&page), by));
            }
            let page: dra_api::v1::types::ClaimList = render::decode(page)?;
            return Ok((render::claims(&page.items, &page.admin_access), by));
        }
        let page: dra_api::v1::types::ClaimList = render::decode(page)?;
        items.extend(page.items);
        admin_access.extend(page.admin_access);
        match page.continue_token {
            Some(next) => token = Some(next),
            None => break,
        }
    }
    let text = if json {
        pretty(&serde_json::json!({"items": items, "adminAccess": admin_access}))
    } else {
        render::claims(&items, &admin_access)
    };
    Ok((text, by))
}
