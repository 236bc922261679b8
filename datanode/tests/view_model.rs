//! A model of a node group's replication and view-change protocol,
//! explored exhaustively with stateright: every interleaving of writes,
//! stream deliveries, crashes, restarts, wrong suspicions (a pause or a
//! partition looks like a death), lost arbitrator answers, catch-up and
//! hand-back, within bounds.
//!
//! The arbitrator's rule is the real one (`View::change`, which the control
//! plane runs); the nodes' side mirrors `cluster/` and `log/ship.rs` step
//! for step, one action per point where the real code can be interrupted
//! or can see the world change under it. What is left out, on purpose:
//!
//! - Time. Every timeout is "may happen at any moment", which covers every
//!   setting of it: a failure detector that suspects a live node, a
//!   catch-up that gives up, a node that stops serving because it cannot
//!   reach the arbitrator.
//! - Versions of a row. Every write is a row of its own, so "holds the
//!   write" is set membership; the stream's order keeps versions in order
//!   in the real code (records of a fragment are applied in the order they
//!   were committed, copies included).
//! - Durability modes. Under `--durability sync` a commit is on disk
//!   before it is acknowledged, on the primary and on every backup; the
//!   model keeps one set of rows per node, which survives a crash.
//!
//! The properties say what a user relies on: every acknowledged write is
//! on every node that serves the current view, and on the disk of every
//! node of the arbitrator's view that has not given its disk up to be
//! caught up (so the node that goes on alone after a whole-group restart
//! has every acknowledged write).
//!
//! Groups of two are checked with every kind of fault in the suite; a
//! group of three, with the parts other nodes play in a rejoin, with kills
//! and restarts, on demand (`--ignored`).

use std::collections::BTreeSet;

use shoal_wire::internal::{NodeId, View, ViewChange};
use stateright::{Checker, Model, Property};

/// A node, by index; its node id is the index plus one.
type Node = usize;

fn id(node: Node) -> NodeId {
    NodeId(node as u32 + 1)
}

fn index(node: NodeId) -> Node {
    node.0 as usize - 1
}

/// A write: a row of database `db`, the `n`th write of the run, made by
/// node `by` as the database's primary.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
struct Write {
    db: u8,
    n: u8,
    by: Node,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
enum Record {
    Put(Write),
    /// A catch-up step: every row of `db` the sender holds, which the
    /// receiver's rows of `db` become. (The real code sends a digest and
    /// copies only the buckets of rows the receiver does not hold alike,
    /// which leaves it with the same rows.)
    Copy {
        db: u8,
        rows: BTreeSet<Write>,
    },
}

impl Record {
    fn db(&self) -> u8 {
        match self {
            Record::Put(w) => w.db,
            Record::Copy { db, .. } => *db,
        }
    }
}

/// `log/ship.rs`'s `Backup`.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
struct Backup {
    node: Node,
    acked: u8,
    counted: bool,
    joining: bool,
}

/// `log/ship.rs`'s `Outbox`, with its rules; volatile.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq)]
struct Outbox {
    last: u8,
    records: Vec<(u8, Record, Option<Node>)>,
    backups: Vec<Backup>,
    fenced: bool,
}

impl Outbox {
    fn held_by_all(&self) -> u8 {
        (self.backups.iter().filter(|b| b.counted))
            .map(|b| b.acked)
            .min()
            .unwrap_or(self.last)
    }

    fn trim(&mut self) {
        let held = (self.backups.iter().map(|b| b.acked).min()).unwrap_or(self.last);
        self.records.retain(|(seq, _, _)| *seq > held);
    }

    fn backup(&mut self, node: Node) -> Option<&mut Backup> {
        self.backups.iter_mut().find(|b| b.node == node)
    }

    fn acked(&self, node: Node) -> Option<u8> {
        self.backups
            .iter()
            .find(|b| b.node == node)
            .map(|b| b.acked)
    }

    fn set_backups(&mut self, nodes: &[Node]) {
        let mut kept: Vec<Backup> = (nodes.iter())
            .map(|&node| Backup {
                node,
                acked: self.acked(node).unwrap_or(self.last),
                counted: true,
                joining: false,
            })
            .collect();
        kept.extend(
            (self.backups.iter())
                .filter(|b| b.joining && !nodes.contains(&b.node))
                .copied(),
        );
        self.backups = kept;
        self.trim();
    }

    fn catch_up(&mut self, node: Node) {
        self.backups.retain(|b| b.node != node);
        self.backups.push(Backup {
            node,
            acked: self.last,
            counted: false,
            joining: true,
        });
    }

    fn count(&mut self, node: Node) {
        if let Some(b) = self.backup(node) {
            b.counted = true;
        }
    }

    fn remove(&mut self, node: Node) {
        self.backups.retain(|b| b.node != node);
        self.trim();
    }

    fn append(&mut self, record: Record, only: Option<Node>) -> u8 {
        self.last += 1;
        self.records.push((self.last, record, only));
        self.last
    }
}

/// Where a node (J) is in coming back (`catchup::rejoin`).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Rejoin {
    Idle,
    /// Its disk marked as no replica to go on from (`emptied`).
    Emptied,
    /// `helper` agreed to catch it up from view `out_in` on.
    Waiting {
        out_in: u64,
        helper: Node,
    },
}

/// Where a node (S) is in catching `joiner` up (`catchup::lead`, or
/// `catchup::copy_asked` for a part of another node's run).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Step {
    /// Take J out of the view if it is in it, and put it in the stream.
    Start,
    /// Copy database `db` if this node is its primary, then the next.
    Copy { db: u8 },
    /// Wait until J holds the stream up to `end`, then count it.
    Copied { end: u8 },
    /// Wait until J holds the stream up to `last`.
    Counted { last: u8 },
    /// The lead: wait until every other node of the view has done its
    /// part (answered `Copied`).
    Parts,
    /// The lead: ask for the view with J in it.
    Add,
    /// A part: answered `Copied`; waits for the view after the run's,
    /// which keeps J in its stream if J is in it, or moves it on itself.
    Done,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
struct Catching {
    joiner: Node,
    /// The view of the run's own it started from.
    from: u64,
    step: Step,
    /// The node leading the run this is a part of (`Copy{node, view}`);
    /// none for the lead itself.
    lead: Option<Node>,
    /// The lead: the nodes asked to do their part, as bits.
    asked: u8,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct NodeState {
    up: bool,
    /// The view it acts on (in memory).
    view: View,
    /// The view in its `group.json` (what it knows after a restart).
    disk_view: View,
    joined: bool,
    /// Rows, in memory and on disk.
    rows: BTreeSet<Write>,
    /// On disk: its replicas were emptied to be caught up, and it has not
    /// been let in since; its disk is no replica the group can go on from.
    emptied: bool,
    out: Outbox,
    /// Commits waiting for their backups: sequence number and write.
    pending: Vec<(u8, Write)>,
    catching: Option<Catching>,
    handing_back: Option<Node>,
    rejoin: Rejoin,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct State {
    arbiter: View,
    nodes: Vec<NodeState>,
    writes: u8,
    faults: u8,
    /// Requests to be caught up so far (each run appends copies).
    asks: u8,
    /// Every write a client was told succeeded.
    acked: BTreeSet<Write>,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Action {
    /// A client writes to `db` through node `node`, which takes it as the
    /// database's primary.
    Write(Node, u8),
    /// Commits whose backups hold them are acknowledged.
    Settle(Node),
    /// The next record of `from`'s stream reaches `to`, is applied there
    /// and acknowledged.
    Deliver {
        from: Node,
        to: Node,
    },
    /// kill -9.
    Crash(Node),
    /// SIGTERM: a serving node with no write under way leaves the view
    /// (its primaries go to the others), then stops.
    Stop(Node),
    Restart(Node),
    /// A node learns the arbitrator's view (asking it, or told by a peer).
    Learn(Node),
    /// The control plane pushes the group to a node, which keeps it on
    /// disk.
    Push(Node),
    /// A node finds a peer dead (rightly or not) and asks for the view
    /// without it.
    Suspect(Node, Node),
    /// A node that cannot reach the arbitrator stops serving.
    Undecided(Node),
    /// A stream drops a node catching up that fell too far behind.
    DropSlow {
        from: Node,
        backup: Node,
    },
    /// J, back, takes itself out of the view.
    Leave(Node),
    /// J, out of the view it knows, with a live peer, empties its
    /// replicas (and marks its disk so).
    Empty(Node),
    /// J asks `helper` to catch it up.
    AskJoin {
        joiner: Node,
        helper: Node,
    },
    /// J stops waiting to be let in: its helper stopped serving, or its
    /// run failed.
    WaitTimeout(Node),
    /// J sees itself in a view after the one it left.
    LetIn(Node),
    /// J, in the view, no live peer: asks for the view of itself alone.
    Alone(Node),
    /// S takes the next step of catching its joiner up.
    CatchStep(Node),
    /// S's catching up stops (a timeout, a lost link).
    CatchFail(Node),
    /// The lead asks `part` to copy its own primaries to the joiner too
    /// (`Copy{node, view}`); `part` starts if it is in the run's view
    /// with the lead, and the joiner is not.
    AskCopy {
        lead: Node,
        part: Node,
    },
    /// A part that has done its part ends: the view moved on (keeping the
    /// joiner in its stream if the joiner is in it), or nobody let the
    /// joiner in in time and it moves the view on from the run's itself.
    PartEnd(Node),
    /// S starts handing a live node its primaries back.
    GiveBack(Node),
    /// S asks for the view that restores them.
    HandBack(Node),
    /// S's handing back stops before it asked.
    HandBackFail(Node),
}

/// The model: `nodes` in one group, `dbs[d]` the preferred primary of
/// database `d`, and bounds on writes, faults and view numbers.
#[derive(Clone, Debug)]
struct Group {
    nodes: usize,
    dbs: Vec<Node>,
    writes: u8,
    faults: u8,
    asks: u8,
    views: u64,
    /// Faults are kills (and their restarts) alone, and a node suspects
    /// only a peer that is down: for a group of three, whose every fault
    /// at every step is more states than memory holds.
    kills_only: bool,
}

impl Group {
    fn members(&self) -> Vec<NodeId> {
        (0..self.nodes).map(id).collect()
    }

    fn serving(&self, s: &State, i: Node) -> bool {
        let n = &s.nodes[i];
        n.up && n.joined && n.view.members.contains(&id(i))
    }

    /// `Cluster::place`: the node `i` takes as the primary of `db`.
    fn primary(&self, s: &State, i: Node, db: u8) -> Node {
        let n = &s.nodes[i];
        let preferred = self.dbs[db as usize];
        let primary = (n.view.primary(id(preferred))).map_or(preferred, index);
        if primary == i
            && n.handing_back == Some(preferred)
            && n.view.members.contains(&id(preferred))
        {
            return preferred;
        }
        primary
    }

    /// Whether `i` takes writes of `db`.
    fn primary_here(&self, s: &State, i: Node, db: u8) -> bool {
        self.serving(s, i) && self.primary(s, i, db) == i
    }

    /// `Cluster::apply_view`.
    fn apply_view(&self, s: &mut State, i: Node) {
        let serving = self.serving(s, i);
        let n = &mut s.nodes[i];
        if serving {
            n.out.fenced = false;
        } else {
            // A fence fails every commit waiting, and ends a catching up.
            n.out.fenced = true;
            n.pending.clear();
            if let Some(c) = n.catching.take() {
                n.out.remove(c.joiner);
            }
        }
        let backups: Vec<Node> = match serving {
            true => (n.view.members.iter().map(|&m| index(m)))
                .filter(|&m| m != i)
                .collect(),
            false => Vec::new(),
        };
        n.out.set_backups(&backups);
    }

    /// `Cluster::set_view`.
    fn set_view(&self, s: &mut State, i: Node, view: View) {
        let n = &mut s.nodes[i];
        if view.number <= n.view.number {
            return;
        }
        if n.view.members.contains(&id(i)) && !view.members.contains(&id(i)) {
            n.joined = false;
        }
        n.view = view;
        self.apply_view(s, i);
    }

    /// Node `i` asks the arbitrator, and takes its answer (granted or not).
    fn propose(&self, s: &mut State, i: Node, remove: &[Node], add: &[Node], restore: &[Node]) {
        let ids = |nodes: &[Node]| nodes.iter().map(|&n| id(n)).collect();
        let asked = ViewChange {
            node_id: id(i),
            from: s.nodes[i].view.number,
            remove: ids(remove),
            add: ids(add),
            restore: ids(restore),
        };
        if let Some(next) = s.arbiter.change(&asked, &self.members()) {
            s.arbiter = next;
        }
        let answer = s.arbiter.clone();
        self.set_view(s, i, answer);
    }

    fn crash(&self, s: &mut State, i: Node) {
        let n = &mut s.nodes[i];
        n.up = false;
        n.joined = false;
        n.out = Outbox::default();
        n.pending.clear();
        n.catching = None;
        n.handing_back = None;
        n.rejoin = Rejoin::Idle;
        n.view = n.disk_view.clone();
    }

    fn catch_fail(&self, s: &mut State, i: Node) {
        if let Some(c) = s.nodes[i].catching.take() {
            s.nodes[i].out.remove(c.joiner);
        }
    }

    /// The next record of `from`'s stream for `to`, if `to` would take it:
    /// its sequence number and whether it is for `to` at all.
    fn next_record<'a>(
        &self,
        s: &'a State,
        from: Node,
        to: Node,
    ) -> Option<(u8, Option<&'a Record>)> {
        let out = &s.nodes[from].out;
        let acked = out.acked(to)?;
        let (seq, record, only) = out.records.iter().find(|(seq, _, _)| *seq > acked)?;
        if only.is_some_and(|o| o != to) {
            return Some((*seq, None));
        }
        // A backup takes a database's changes only from its primary in
        // its own view; anything else closes the link.
        (self.primary(s, to, record.db()) == from).then_some((*seq, Some(record)))
    }
}

impl Model for Group {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let view = View {
            number: 1,
            members: self.members(),
            moved: Vec::new(),
        };
        let node = |_| NodeState {
            up: true,
            view: view.clone(),
            disk_view: view.clone(),
            joined: true,
            rows: BTreeSet::new(),
            emptied: false,
            out: Outbox::default(),
            pending: Vec::new(),
            catching: None,
            handing_back: None,
            rejoin: Rejoin::Idle,
        };
        let mut s = State {
            arbiter: view.clone(),
            nodes: (0..self.nodes).map(node).collect(),
            writes: 0,
            faults: 0,
            asks: 0,
            acked: BTreeSet::new(),
        };
        for i in 0..self.nodes {
            self.apply_view(&mut s, i);
        }
        vec![s]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        let fault = s.faults < self.faults;
        for i in 0..self.nodes {
            let n = &s.nodes[i];
            if !n.up {
                actions.push(Action::Restart(i));
                continue;
            }
            if fault && self.kills_only {
                actions.push(Action::Crash(i));
            } else if fault {
                actions.push(Action::Crash(i));
                let in_flight = !n.pending.is_empty();
                let live_peer = (n.view.members.iter().map(|&m| index(m)))
                    .any(|p| p != i && self.serving(s, p));
                if self.serving(s, i) && !in_flight && live_peer && s.arbiter.number < self.views {
                    actions.push(Action::Stop(i));
                }
            }
            if s.writes < self.writes {
                for db in 0..self.dbs.len() as u8 {
                    if self.primary_here(s, i, db) {
                        actions.push(Action::Write(i, db));
                    }
                }
            }
            if (n.pending.iter()).any(|(seq, _)| *seq <= n.out.held_by_all()) {
                actions.push(Action::Settle(i));
            }
            for b in &n.out.backups {
                if s.nodes[b.node].up && self.next_record(s, i, b.node).is_some() {
                    actions.push(Action::Deliver {
                        from: i,
                        to: b.node,
                    });
                }
                if fault && !self.kills_only && !b.counted {
                    actions.push(Action::DropSlow {
                        from: i,
                        backup: b.node,
                    });
                }
            }
            if s.arbiter.number > n.view.number {
                actions.push(Action::Learn(i));
            }
            if n.disk_view != s.arbiter {
                actions.push(Action::Push(i));
            }
            let serving = self.serving(s, i);
            if serving && s.arbiter.number < self.views {
                for m in &n.view.members {
                    let peer = index(*m);
                    if peer != i && !(self.kills_only && s.nodes[peer].up) {
                        actions.push(Action::Suspect(i, peer));
                    }
                }
            }
            if serving && fault && !self.kills_only {
                actions.push(Action::Undecided(i));
            }
            if !serving {
                let in_view = n.view.members.contains(&id(i));
                let live_peer = (n.view.members.iter().map(|&m| index(m)))
                    .any(|p| p != i && self.serving(s, p));
                match n.rejoin {
                    Rejoin::Idle if in_view && s.arbiter.number < self.views => {
                        actions.push(Action::Leave(i));
                        if !n.emptied {
                            actions.push(Action::Alone(i));
                        }
                    }
                    Rejoin::Idle if !in_view && live_peer => actions.push(Action::Empty(i)),
                    Rejoin::Emptied if s.asks < self.asks && s.arbiter.number < self.views => {
                        for p in 0..self.nodes {
                            let helping = s.nodes[p].catching;
                            if p != i && self.serving(s, p) && helping.is_none_or(|c| c.joiner == i)
                            {
                                actions.push(Action::AskJoin {
                                    joiner: i,
                                    helper: p,
                                });
                            }
                        }
                    }
                    Rejoin::Idle | Rejoin::Emptied => {}
                    Rejoin::Waiting { out_in, helper } => {
                        // It asks again once its helper no longer serves
                        // (which ends the helper's run), or after
                        // `LET_IN_WITHIN` if that run failed.
                        let h = &s.nodes[helper];
                        if !self.serving(s, helper) || h.catching.is_none_or(|c| c.joiner != i) {
                            actions.push(Action::WaitTimeout(i));
                        }
                        if n.view.number > out_in && in_view {
                            actions.push(Action::LetIn(i));
                        }
                    }
                }
            }
            if let Some(c) = n.catching {
                let ready = match c.step {
                    Step::Start | Step::Copy { .. } => true,
                    Step::Copied { end } => n.out.acked(c.joiner).is_some_and(|a| a >= end),
                    Step::Counted { last } => n.out.acked(c.joiner).is_none_or(|a| a >= last),
                    Step::Parts => self.parts(s, c, i).into_iter().all(|k| {
                        c.asked & (1 << k) != 0
                            && s.nodes[k].catching
                                == Some(Catching {
                                    step: Step::Done,
                                    lead: Some(i),
                                    asked: 0,
                                    ..c
                                })
                    }),
                    Step::Add => s.arbiter.number < self.views,
                    Step::Done => false,
                };
                if ready {
                    actions.push(Action::CatchStep(i));
                }
                match c.step {
                    Step::Done => actions.push(Action::PartEnd(i)),
                    _ => actions.push(Action::CatchFail(i)),
                }
                // The lead asks the others once it has its run's view.
                if c.lead.is_none() && c.step != Step::Start {
                    let unasked = self.parts(s, c, i).into_iter();
                    for k in unasked.filter(|&k| c.asked & (1 << k) == 0) {
                        actions.push(Action::AskCopy { lead: i, part: k });
                    }
                }
            }
            match n.handing_back {
                None if serving => {
                    // Only to a node that answers it serves in this view.
                    let back = (n.view.moved.iter()).any(|&(from, to)| {
                        let node = &s.nodes[index(from)];
                        to == id(i)
                            && n.view.members.contains(&from)
                            && self.serving(s, index(from))
                            && node.view.number >= n.view.number
                    });
                    if back {
                        actions.push(Action::GiveBack(i));
                    }
                }
                None => {}
                Some(to) => {
                    actions.push(Action::HandBackFail(i));
                    let in_flight = (n.pending.iter()).any(|(_, w)| self.dbs[w.db as usize] == to);
                    let held = n.out.acked(to).is_some_and(|a| a >= n.out.last);
                    if !in_flight && held && s.arbiter.number < self.views {
                        actions.push(Action::HandBack(i));
                    }
                }
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Write(i, db) => {
                let w = Write {
                    db,
                    n: s.writes,
                    by: i,
                };
                s.writes += 1;
                let n = &mut s.nodes[i];
                n.rows.insert(w);
                if n.out.backups.is_empty() {
                    s.acked.insert(w);
                } else {
                    let seq = n.out.append(Record::Put(w), None);
                    n.pending.push((seq, w));
                }
            }
            Action::Settle(i) => {
                let n = &mut s.nodes[i];
                let held = n.out.held_by_all();
                for (_, w) in n.pending.iter().filter(|(seq, _)| *seq <= held) {
                    s.acked.insert(*w);
                }
                n.pending.retain(|(seq, _)| *seq > held);
            }
            Action::Deliver { from, to } => {
                let (seq, record) = self.next_record(&s, from, to)?;
                let record = record.cloned();
                let n = &mut s.nodes[to];
                match record {
                    Some(Record::Put(w)) => {
                        n.rows.insert(w);
                    }
                    Some(Record::Copy { db, rows }) => {
                        n.rows.retain(|w| w.db != db);
                        n.rows.extend(rows);
                    }
                    None => {}
                }
                let out = &mut s.nodes[from].out;
                out.backup(to).expect("a backup").acked = seq;
                out.trim();
            }
            Action::Crash(i) => {
                s.faults += 1;
                self.crash(&mut s, i);
            }
            Action::Stop(i) => {
                s.faults += 1;
                self.propose(&mut s, i, &[i], &[], &[]);
                self.crash(&mut s, i);
            }
            Action::Restart(i) => {
                s.nodes[i].up = true;
                self.apply_view(&mut s, i);
            }
            Action::Learn(i) => {
                let view = s.arbiter.clone();
                self.set_view(&mut s, i, view);
            }
            Action::Push(i) => {
                let view = s.arbiter.clone();
                s.nodes[i].disk_view = view.clone();
                self.set_view(&mut s, i, view);
            }
            Action::Suspect(i, peer) => self.propose(&mut s, i, &[peer], &[], &[]),
            Action::Undecided(i) => {
                s.faults += 1;
                s.nodes[i].joined = false;
                self.apply_view(&mut s, i);
            }
            Action::DropSlow { from, backup } => {
                s.faults += 1;
                s.nodes[from].out.remove(backup);
            }
            Action::Leave(i) => self.propose(&mut s, i, &[i], &[], &[]),
            // Its disk is given up as a replica to go on from; its rows
            // stay, to be reconciled by the catch-up's copies.
            Action::Empty(i) => {
                let n = &mut s.nodes[i];
                n.emptied = true;
                n.rejoin = Rejoin::Emptied;
            }
            Action::AskJoin { joiner, helper } => {
                s.asks += 1;
                // A run under way for J is superseded once its request to
                // let J in (if it is making one) is answered. The helper
                // moves the view on to one of the run's own, without J
                // (taking J out if it is in), and answers with it: only
                // the next view, which adds J, lets it in.
                s.nodes[helper].catching = None;
                let before = s.arbiter.number;
                let remove: Vec<Node> = (s.nodes[helper].view.members.contains(&id(joiner)))
                    .then_some(joiner)
                    .into_iter()
                    .collect();
                self.propose(&mut s, helper, &remove, &[], &[]);
                let view = &s.nodes[helper].view;
                let granted = s.arbiter.number > before && s.arbiter == *view;
                if !granted || view.members.contains(&id(joiner)) || !self.serving(&s, helper) {
                    s.nodes[helper].out.remove(joiner);
                    return Some(s);
                }
                s.nodes[helper].catching = Some(Catching {
                    joiner,
                    from: view.number,
                    step: Step::Start,
                    lead: None,
                    asked: 0,
                });
                s.nodes[joiner].rejoin = Rejoin::Waiting {
                    out_in: s.nodes[helper].view.number,
                    helper,
                };
            }
            Action::WaitTimeout(i) => s.nodes[i].rejoin = Rejoin::Idle,
            Action::LetIn(i) => {
                let n = &mut s.nodes[i];
                n.joined = true;
                n.emptied = false;
                n.rejoin = Rejoin::Idle;
                self.apply_view(&mut s, i);
            }
            Action::Alone(i) => {
                let others: Vec<Node> = (s.nodes[i].view.members.iter().map(|&m| index(m)))
                    .filter(|&m| m != i)
                    .collect();
                self.propose(&mut s, i, &others, &[], &[]);
                if s.nodes[i].view.members == [id(i)] {
                    s.nodes[i].joined = true;
                    self.apply_view(&mut s, i);
                }
            }
            Action::CatchStep(i) => self.catch_step(&mut s, i),
            Action::AskCopy { lead, part } => {
                let mut run = s.nodes[lead].catching?;
                run.asked |= 1 << part;
                s.nodes[lead].catching = Some(run);
                // `copy_asked`: the part's own view is the run's, with the
                // lead in it and the joiner out; a run of its own for the
                // joiner before is superseded (the joiner stays in its
                // stream, for this one).
                let k = &s.nodes[part];
                let view = &k.view;
                if self.serving(&s, part)
                    && view.number == run.from
                    && view.members.contains(&id(lead))
                    && !view.members.contains(&id(run.joiner))
                {
                    s.nodes[part].catching = Some(Catching {
                        step: Step::Start,
                        lead: Some(lead),
                        asked: 0,
                        ..run
                    });
                }
            }
            Action::PartEnd(k) => {
                let c = s.nodes[k].catching?;
                if s.nodes[k].view.number <= c.from {
                    // Nobody let it in in time: the view moves on from the
                    // run's, so that the lead can no longer let it in.
                    self.propose(&mut s, k, &[], &[], &[]);
                }
                let n = &mut s.nodes[k];
                if n.view.number > c.from && !n.view.members.contains(&id(c.joiner)) {
                    n.out.remove(c.joiner);
                }
                if n.catching == Some(c) {
                    n.catching = None;
                }
            }
            Action::CatchFail(i) => self.catch_fail(&mut s, i),
            Action::GiveBack(i) => {
                let n = &s.nodes[i];
                let (to, _) = *(n.view.moved.iter())
                    .find(|&&(from, to)| to == id(i) && n.view.members.contains(&from))?;
                s.nodes[i].handing_back = Some(index(to));
            }
            Action::HandBack(i) => {
                let to = s.nodes[i].handing_back?;
                self.propose(&mut s, i, &[], &[], &[to]);
                s.nodes[i].handing_back = None;
                self.apply_view(&mut s, i);
            }
            Action::HandBackFail(i) => {
                s.nodes[i].handing_back = None;
                self.apply_view(&mut s, i);
            }
        }
        Some(s)
    }

    fn within_boundary(&self, s: &State) -> bool {
        s.arbiter.number <= self.views
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "every node serving the current view holds every acknowledged write",
                |m: &Group, s: &State| {
                    (0..m.nodes).all(|i| {
                        !(m.serving(s, i) && s.nodes[i].view == s.arbiter)
                            || s.acked.is_subset(&s.nodes[i].rows)
                    })
                },
            ),
            Property::always(
                "every member of the view whose disk is a replica holds every acknowledged write",
                |_: &Group, s: &State| {
                    (s.arbiter.members.iter().map(|&m| &s.nodes[index(m)]))
                        .all(|n| n.emptied || s.acked.is_subset(&n.rows))
                },
            ),
            Property::sometimes(
                "a survivor acknowledges writes after a failover",
                |m: &Group, s: &State| s.acked.iter().any(|w| w.by != m.dbs[w.db as usize]),
            ),
            Property::sometimes(
                "a node caught up is let in again",
                |m: &Group, s: &State| {
                    s.arbiter.number > 3 && (0..m.nodes).all(|i| m.serving(s, i))
                },
            ),
            Property::sometimes(
                "primaries handed back after a failover",
                |_: &Group, s: &State| s.arbiter.number > 3 && s.arbiter.moved.is_empty(),
            ),
        ]
    }
}

impl Group {
    /// `catchup::catch_up`, one step.
    fn catch_step(&self, s: &mut State, i: Node) {
        let Some(run) = s.nodes[i].catching else {
            return;
        };
        let Catching {
            joiner,
            from,
            step,
            lead: c_lead,
            ..
        } = run;
        // A view that moved on from the run's changes what it must copy.
        if s.nodes[i].view.number != from {
            return self.catch_fail(s, i);
        }
        let next = match step {
            Step::Start => {
                if s.nodes[i].view.members.contains(&id(joiner)) {
                    return self.catch_fail(s, i);
                }
                s.nodes[i].out.catch_up(joiner);
                Step::Copy { db: 0 }
            }
            Step::Copy { db } if db as usize == self.dbs.len() => Step::Copied {
                end: s.nodes[i].out.last,
            },
            Step::Copy { db } => {
                if self.primary_here(s, i, db) {
                    if s.nodes[i].out.acked(joiner).is_none() {
                        return self.catch_fail(s, i);
                    }
                    let n = &mut s.nodes[i];
                    let rows = n.rows.iter().filter(|w| w.db == db).copied().collect();
                    n.out.append(Record::Copy { db, rows }, Some(joiner));
                }
                Step::Copy { db: db + 1 }
            }
            Step::Copied { .. } => {
                s.nodes[i].out.count(joiner);
                Step::Counted {
                    last: s.nodes[i].out.last,
                }
            }
            Step::Counted { .. } if c_lead.is_some() => Step::Done,
            Step::Counted { .. } => Step::Parts,
            Step::Parts => Step::Add,
            Step::Done => Step::Done,
            Step::Add => {
                self.propose(s, i, &[], &[joiner], &[]);
                if s.nodes[i].view.members.contains(&id(joiner)) {
                    s.nodes[i].catching = None;
                    return;
                }
                Step::Add
            }
        };
        s.nodes[i].catching = Some(Catching { step: next, ..run });
    }

    /// The other nodes of the view of run `c`, which `i` leads: each
    /// does its part.
    fn parts(&self, s: &State, c: Catching, i: Node) -> Vec<Node> {
        (s.nodes[i].view.members.iter().map(|&m| index(m)))
            .filter(|&k| k != i && k != c.joiner)
            .collect()
    }
}

fn check(group: Group) {
    let checker = group.checker().threads(2).spawn_bfs().join();
    report(&checker);
}

/// Depth first: keeps only each state's fingerprint, not a frontier of
/// whole states — for a group of three, whose frontier outgrows memory.
fn check_depth_first(group: Group) {
    let checker = group.checker().threads(2).spawn_dfs().join();
    report(&checker);
}

fn report(checker: &impl Checker<Group>) {
    println!(
        "{} states, {} unique, max depth {}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth()
    );
    checker.assert_properties();
}

/// Two nodes, a database preferring each: kills, restarts, wrong
/// suspicions, lost and refused arbitrator answers, catch-up and
/// hand-back.
#[test]
fn a_group_of_two_loses_no_acknowledged_write() {
    check(Group {
        nodes: 2,
        dbs: vec![0, 1],
        writes: 1,
        faults: 1,
        asks: 2,
        views: 5,
        kills_only: false,
    });
}

/// Deeper: two writes, one view more. Minutes in a release build and
/// gigabytes of memory: `cargo test --release -p shoal-datanode --test
/// view_model -- --ignored`. (Two writes with two faults and six views
/// outgrew 24 GiB.)
#[test]
#[ignore = "minutes in a release build; run with --release -- --ignored"]
fn a_group_of_two_loses_no_acknowledged_write_deeper() {
    check(Group {
        nodes: 2,
        dbs: vec![0, 1],
        writes: 2,
        faults: 1,
        asks: 2,
        views: 6,
        kills_only: false,
    });
}

/// Three nodes: a node back is caught up by every other node of the view,
/// each copying the databases it is the primary of (the lead's own part
/// and a `Copy` part of each other node), and let in only once every part
/// is done. The third node prefers no database, so that a lead may have
/// nothing of its own to copy. Kills and restarts only (the group of two
/// has every kind of fault); depth first, for memory. 18.9 M distinct
/// states, about a minute in a release build (far longer in the suite's
/// debug build): `cargo test --release -p shoal-datanode --test view_model
/// -- --ignored`. Letting the node in without waiting for the other parts
/// (the fault the real-process test of a group of three found) gives a
/// counterexample here in 37 steps.
#[test]
#[ignore = "a minute in a release build; run with --release -- --ignored"]
fn a_group_of_three_loses_no_acknowledged_write() {
    check_depth_first(Group {
        nodes: 3,
        dbs: vec![0, 1, 1],
        writes: 1,
        faults: 1,
        asks: 1,
        views: 5,
        kills_only: true,
    });
}
