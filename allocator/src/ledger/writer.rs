//! The single writer thread and group commit.
//!
//! Callers hand operations to the writer over a channel and block on a one-shot reply. The writer
//! drains everything queued (up to a bound), applies each operation in order inside ONE write
//! transaction, commits once durably, and only then replies to every caller. An operation that is
//! refused (conflict, no fit) has written nothing, by construction: operations validate before they
//! mutate. An operation that fails in storage poisons the transaction: it is aborted, that caller
//! gets the error, and the other operations of the batch are applied again in a fresh transaction.
//!
//! Deferred operations ([`WriterHandle::defer`]) have no caller waiting and need no sync of their
//! own: they ride along with the next batch of waited-for operations, or, when none comes within
//! the defer limit, are committed alone without a sync, to be made durable by the next durable
//! commit (or the last one, at shutdown). A crash may lose them, which is why only operations the
//! ledger can lose are deferred.
//!
//! The writer also owns the in-memory [`Inventory`] the fitting logic reads. It is derived from the
//! file on open, changed only alongside the tables, and rebuilt from the file whenever a
//! transaction is abandoned, so it never runs ahead of what is durable for long. Read-only jobs
//! ([`WriterHandle::read`]) run between batches against that state, with no transaction and no
//! commit: they see exactly what the last commit made durable.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redb::{Database, Durability, ReadableDatabase};

use super::stats::{CommitSample, StatsRecorder};
use super::store::{self, Clock};
use super::txn::Tables;
use super::{CommitGuard, LedgerError, Result};
use crate::fit::Inventory;

/// Retention bounds of the journal, the audit log and the history.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Retention {
    pub(crate) audit: u64,
    pub(crate) intents: u64,
    /// History entries that ended longer ago than this (milliseconds) are pruned.
    pub(crate) history_ms: u64,
    /// Holder intervals that ended longer ago than this (milliseconds) are rolled up into
    /// hourly totals.
    pub(crate) rollup_after_ms: u64,
}

/// What the writer keeps between transactions.
pub(crate) struct WriterState {
    pub(crate) inventory: Inventory,
    pub(crate) next_intent: u64,
    pub(crate) next_audit: u64,
    pub(crate) next_history: u64,
    pub(crate) clock: Clock,
    /// The clock's last reading by an operation (0 before the first): the time the history is
    /// pruned against, so that pruning takes no reading of its own.
    pub(crate) last_now: std::cell::Cell<u64>,
    pub(crate) retention: Retention,
    /// The history sequence number the next rollup scan starts from (0: the oldest entry).
    pub(crate) rollup_cursor: u64,
}

impl WriterState {
    /// Prunes and rolls up after a batch of `operations` (see [`Tables::prune`]).
    fn prune(&mut self, tables: &mut Tables<'_>, operations: usize) -> Result<()> {
        let now_ms = self.last_now.get();
        tables.prune(self.retention, operations, now_ms, &mut self.rollup_cursor)
    }

    /// Reloads everything derived from the file.
    pub(crate) fn reload(&mut self, db: &Database) -> Result<()> {
        let txn = db.begin_read().map_err(LedgerError::storage)?;
        self.inventory = store::load_inventory(&txn)?;
        let next = store::next_sequences(&txn)?;
        self.next_intent = next.intent;
        self.next_audit = next.audit;
        self.next_history = next.history;
        Ok(())
    }
}

/// One operation inside a write transaction: the batch's open tables and the writer's state.
pub(crate) struct Tx<'a, 't> {
    pub(crate) tables: &'a mut Tables<'t>,
    pub(crate) state: &'a mut WriterState,
    /// The share of each device the import being written holds, in thousandths, for the
    /// history intervals its audit entry opens; empty otherwise.
    pub(crate) import_shares: std::collections::BTreeMap<String, u32>,
}

/// A queued operation with its reply channel.
pub(crate) trait Job: Send {
    /// Applies the operation; `false` when the transaction must be abandoned.
    fn apply(&mut self, tx: &mut Tx<'_, '_>) -> bool;
    /// Sends the reply; `outcome` is the error of the batch's commit when it failed or was
    /// refused, in which case the operation took no effect.
    fn finish(self: Box<Self>, outcome: Result<()>);
    /// Whether the operation's commit must be synced before it is answered.
    fn durable(&self) -> bool {
        true
    }
}

struct Op<T, F> {
    run: F,
    result: Option<Result<T>>,
    reply: SyncSender<Result<T>>,
}

impl<T, F> Job for Op<T, F>
where
    T: Send,
    F: FnMut(&mut Tx<'_, '_>) -> Result<T> + Send,
{
    fn apply(&mut self, tx: &mut Tx<'_, '_>) -> bool {
        let result = (self.run)(tx);
        let keep = !matches!(&result, Err(error) if error.is_storage());
        self.result = Some(result);
        keep
    }

    fn finish(self: Box<Self>, outcome: Result<()>) {
        let result = match outcome {
            Err(error) => Err(error),
            Ok(()) => self.result.unwrap_or(Err(LedgerError::WriterStopped)),
        };
        // The caller may have given up waiting; nothing to do then.
        let _ = self.reply.send(result);
    }
}

/// A deferred operation: nobody waits for it, so a refusal or failure is only logged.
struct Deferred<F> {
    run: F,
    /// What the operation does, for the log.
    what: String,
    failed: Option<LedgerError>,
}

impl<F> Job for Deferred<F>
where
    F: FnMut(&mut Tx<'_, '_>) -> Result<()> + Send,
{
    fn apply(&mut self, tx: &mut Tx<'_, '_>) -> bool {
        match (self.run)(tx) {
            Ok(()) => true,
            Err(error) => {
                let keep = !error.is_storage();
                self.failed = Some(error);
                keep
            }
        }
    }

    fn finish(self: Box<Self>, outcome: Result<()>) {
        if let Some(error) = outcome.err().or(self.failed) {
            tracing::debug!(%error, operation = %self.what, "Deferred ledger operation not applied");
        }
    }

    fn durable(&self) -> bool {
        false
    }
}

/// A read-only job: runs between batches against the committed state.
type ReadJob = Box<dyn FnOnce(&WriterState) + Send>;

/// What the writer thread receives.
enum Message {
    /// An operation for the next batch (or, when it is not [`Job::durable`], a later one).
    Write(Box<dyn Job>),
    /// A read of the committed state, run before the next batch.
    Read(ReadJob),
}

/// The handle callers use to reach the writer.
pub(crate) struct WriterHandle {
    sender: Option<Sender<Message>>,
    thread: Option<JoinHandle<()>>,
}

impl WriterHandle {
    /// Starts the writer thread over `db`.
    pub(crate) fn spawn(
        db: Arc<Database>,
        state: WriterState,
        recorder: Arc<StatsRecorder>,
        max_batch: usize,
        defer_limit: Duration,
        guard: Option<CommitGuard>,
    ) -> Result<Self> {
        let (sender, receiver) = mpsc::channel::<Message>();
        let writer = Writer {
            db,
            recorder,
            guard,
            max_batch: max_batch.max(1),
            defer_limit,
        };
        let thread = std::thread::Builder::new()
            .name("ledger-writer".to_owned())
            .spawn(move || writer.run(state, &receiver))
            .map_err(|error| {
                LedgerError::Storage(format!("cannot start writer thread: {error}"))
            })?;
        Ok(WriterHandle {
            sender: Some(sender),
            thread: Some(thread),
        })
    }

    /// Hands `message` to the writer thread; fails once it has stopped.
    fn send(&self, message: Message) -> Result<()> {
        self.sender
            .as_ref()
            .ok_or(LedgerError::WriterStopped)?
            .send(message)
            .map_err(|_| LedgerError::WriterStopped)
    }

    /// Runs `op` in the writer and waits until the commit that carries it is durable.
    pub(crate) fn submit<T, F>(&self, op: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnMut(&mut Tx<'_, '_>) -> Result<T> + Send + 'static,
    {
        let (reply, answer) = mpsc::sync_channel(1);
        let job: Box<dyn Job> = Box::new(Op {
            run: op,
            result: None,
            reply,
        });
        self.send(Message::Write(job))?;
        answer.recv().map_err(|_| LedgerError::WriterStopped)?
    }

    /// Queues `op` without waiting for it: it is applied with a later batch, and its commit may
    /// not be synced until a later one is (see the module docs). `what` names it in the log
    /// when it is not applied. Fails only when the writer has stopped.
    pub(crate) fn defer<F>(&self, what: String, op: F) -> Result<()>
    where
        F: FnMut(&mut Tx<'_, '_>) -> Result<()> + Send + 'static,
    {
        let job: Box<dyn Job> = Box::new(Deferred {
            run: op,
            what,
            failed: None,
        });
        self.send(Message::Write(job))
    }

    /// Runs `op` on the writer thread against the committed state (no transaction, no commit)
    /// and waits for its result.
    pub(crate) fn read<T, F>(&self, op: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&WriterState) -> Result<T> + Send + 'static,
    {
        let (reply, answer) = mpsc::sync_channel(1);
        let job: ReadJob = Box::new(move |state| {
            let _ = reply.send(op(state));
        });
        self.send(Message::Read(job))?;
        answer.recv().map_err(|_| LedgerError::WriterStopped)?
    }
}

impl Drop for WriterHandle {
    fn drop(&mut self) {
        // Closing the channel ends the writer loop once the queue is drained.
        drop(self.sender.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Answers every operation of `batch` with the error `error(reason)`: none of them took effect.
fn fail_all(batch: Vec<Box<dyn Job>>, reason: &str, error: impl Fn(String) -> LedgerError) {
    for job in batch {
        job.finish(Err(error(reason.to_owned())));
    }
}

/// The writer thread's fixed parts.
struct Writer {
    db: Arc<Database>,
    recorder: Arc<StatsRecorder>,
    guard: Option<CommitGuard>,
    max_batch: usize,
    /// How long a deferred operation waits for a batch to ride along with.
    defer_limit: Duration,
}

impl Writer {
    fn run(&self, mut state: WriterState, receiver: &Receiver<Message>) {
        // Operations taken but not committed yet, in the order they came: only deferred ones
        // are ever left here between turns, until `due`.
        let mut pending: Vec<Box<dyn Job>> = Vec::new();
        let mut due = Instant::now();
        loop {
            let first = if pending.is_empty() {
                receiver.recv().map_err(|_| RecvTimeoutError::Disconnected)
            } else {
                receiver.recv_timeout(due.saturating_duration_since(Instant::now()))
            };
            let mut next = match first {
                Ok(message) => Some(message),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            // Reads run as they arrive, before the batch is applied, so they see committed state.
            while let Some(message) = next.take() {
                match message {
                    Message::Read(read) => read(&state),
                    Message::Write(job) => {
                        if pending.is_empty() {
                            due = Instant::now() + self.defer_limit;
                        }
                        pending.push(job);
                    }
                }
                if pending.len() < self.max_batch {
                    next = receiver.try_recv().ok();
                }
            }
            let commit_now = pending.iter().any(|job| job.durable())
                || pending.len() >= self.max_batch
                || Instant::now() >= due;
            if pending.is_empty() || !commit_now {
                continue;
            }
            let batch = std::mem::take(&mut pending);
            if let Err(error) = self.run_batch(&mut state, batch, false) {
                tracing::error!(%error, "Ledger writer cannot reload its state; stopping");
                return;
            }
        }
        // The channel closed: what is still deferred is committed, and synced, before the end.
        if !pending.is_empty() {
            if let Err(error) = self.run_batch(&mut state, pending, true) {
                tracing::error!(%error, "Ledger writer cannot reload its state; stopping");
            }
        }
    }

    /// Applies and commits one batch, synced when any of its operations needs it or `sync` is
    /// set. Fails only when the state cannot be reloaded from the file.
    fn run_batch(
        &self,
        state: &mut WriterState,
        mut batch: Vec<Box<dyn Job>>,
        sync: bool,
    ) -> Result<()> {
        let db = &*self.db;
        while !batch.is_empty() {
            let started = Instant::now();
            let mut durable = sync || batch.iter().any(|job| job.durable());
            let txn = match db.begin_write() {
                Ok(mut txn) => {
                    if !durable && txn.set_durability(Durability::None).is_err() {
                        durable = true;
                    }
                    txn
                }
                Err(error) => {
                    fail_all(batch, &error.to_string(), |reason| LedgerError::Commit {
                        reason,
                    });
                    return Ok(());
                }
            };
            let mut tables = match Tables::open(&txn) {
                Ok(tables) => tables,
                Err(error) => {
                    // The transaction aborts when dropped on return.
                    fail_all(batch, &error.to_string(), |reason| LedgerError::Commit {
                        reason,
                    });
                    return Ok(());
                }
            };
            let mut poisoned = None;
            for (i, job) in batch.iter_mut().enumerate() {
                let mut tx = Tx {
                    tables: &mut tables,
                    state: &mut *state,
                    import_shares: std::collections::BTreeMap::new(),
                };
                if !job.apply(&mut tx) {
                    poisoned = Some(i);
                    break;
                }
            }
            let pruned = match poisoned {
                None => state.prune(&mut tables, batch.len()),
                Some(_) => Ok(()),
            };
            drop(tables);
            if let Err(error) = pruned {
                tracing::error!(%error, batch_size = batch.len(), "Failed to prune the ledger journal");
                drop(txn.abort());
                state.reload(db)?;
                fail_all(batch, &error.to_string(), |reason| LedgerError::Commit {
                    reason,
                });
                return Ok(());
            }
            if let Some(i) = poisoned {
                drop(txn.abort());
                state.reload(db)?;
                batch.remove(i).finish(Ok(()));
                continue;
            }
            let batch_size = batch.len();
            crate::failpoint::hit("group_commit");
            // Asked last, right before the commit, so that a refusal covers everything decided
            // while the batch was applied.
            if let Some(Err(refusal)) = self.guard.as_ref().map(|guard| guard()) {
                drop(txn.abort());
                state.reload(db)?;
                tracing::warn!(reason = %refusal, batch_size, "Ledger commit refused by its guard");
                for job in batch {
                    job.finish(Err(LedgerError::Fenced {
                        source: Arc::clone(&refusal),
                    }));
                }
                return Ok(());
            }
            let committed = txn.commit();
            let sample = CommitSample {
                batch_size,
                duration: started.elapsed(),
                ok: committed.is_ok(),
                durable,
            };
            self.recorder.record(sample);
            match committed {
                Ok(()) => {
                    for job in batch {
                        job.finish(Ok(()));
                    }
                }
                Err(error) => {
                    tracing::error!(%error, batch_size, "Failed to commit ledger batch");
                    state.reload(db)?;
                    fail_all(batch, &error.to_string(), |reason| LedgerError::Commit {
                        reason,
                    });
                }
            }
            return Ok(());
        }
        Ok(())
    }
}
