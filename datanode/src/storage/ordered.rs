//! An ordered index of a fragment: a B+-tree of row references in DataMemory
//! pages, as RonDB's ordered indexes keep row references and compare through
//! the rows themselves.
//!
//! Every node is one page. A leaf holds up to 2048 entries in key order; an
//! inner node up to 1365 children, each with the smallest entry under it
//! (its *separator*), so a separator is always an entry in the tree and
//! never a copy of a key. Leaves are linked both ways for scans.
//!
//! An entry is 16 bytes: the row reference with which version of the row it
//! orders, and a *prefix* — the first 8 bytes of the entry's whole key in a
//! form whose byte order is the keys' order (`codec::KeyPrefix`). Most
//! comparisons end at the prefix and never touch the row, whose cache line
//! would be a miss.
//!
//! The tree knows nothing of keys: every search takes a comparator that says
//! where an entry lies against the target (`Less`: before it), and the
//! fragment compares through the rows. An entry's place never changes while
//! it is in the tree — the fragment takes it out before the row's key
//! changes and puts it back after.
//!
//! An insert that splits nodes needs pages; it asks for them before anything
//! changes ([`OrderedTree::insert`]), so an operation on several indexes
//! either gets every page it needs or changes nothing. Removing never needs a
//! page: a node that empties goes back to the pool, and two neighbours that
//! together fall under half a node merge.

use std::cmp::Ordering;

use super::fixed::RowRef;
use super::page::{PAGE_SIZE, Page};

/// Words (u64) of an entry.
const WORDS: usize = 2;
/// Entries a leaf holds.
const LEAF_CAP: usize = PAGE_SIZE / 8 / WORDS;
/// Children an inner node holds: separators first, child node numbers after.
const INNER_CAP: usize = PAGE_SIZE / 8 / (WORDS + 1);
/// Where an inner node's child numbers start, in words.
const CHILDREN: usize = WORDS * INNER_CAP;
/// No node.
const NIL: u32 = u32::MAX;
/// Levels a tree may have: far more than 2^32 rows need even with the
/// smallest nodes tests use.
const MAX_HEIGHT: usize = 40;
/// Bytes of an entry.
pub(crate) const ENTRY: usize = 8 * WORDS;

/// One entry: a row, which of its versions it orders (see
/// `Entry::committed`), and the prefix of its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Entry {
    id: u64,
    pub(crate) prefix: u64,
}

impl Entry {
    const COMMITTED: u64 = 1 << 32;
    const OLD: u64 = 1 << 33;

    /// The row as it is now.
    pub(crate) fn current(row: RowRef) -> Entry {
        Entry {
            id: u64::from(row),
            prefix: 0,
        }
    }

    /// The committed version of a row a transaction has changed: kept in the
    /// index beside the current one while their keys differ, so that readers,
    /// who see the committed version, find it in its place.
    pub(crate) fn committed(row: RowRef) -> Entry {
        Entry {
            id: u64::from(row) | Self::COMMITTED,
            prefix: 0,
        }
    }

    /// A row's version an update is replacing, for the moment the update
    /// moves its entries.
    pub(crate) fn old(row: RowRef) -> Entry {
        Entry {
            id: u64::from(row) | Self::OLD,
            prefix: 0,
        }
    }

    /// The same entry with its key's prefix.
    pub(crate) fn with_prefix(self, prefix: u64) -> Entry {
        Entry { prefix, ..self }
    }

    pub(crate) fn is_old(self) -> bool {
        self.id & Self::OLD != 0
    }

    pub(crate) fn row(self) -> RowRef {
        self.id as u32
    }

    pub(crate) fn is_committed(self) -> bool {
        self.id & Self::COMMITTED != 0
    }

    /// The same entry and version of the same row, whatever prefix each has.
    fn same(self, other: Entry) -> bool {
        self.id == other.id
    }
}

struct Node {
    page: Page,
    count: u32,
    /// Neighbouring leaves (inner nodes: unused).
    prev: u32,
    next: u32,
}

impl Node {
    /// Entry `i` of a leaf, or separator `i` of an inner node.
    fn at(&self, i: usize) -> Entry {
        let w = &self.page.words()[WORDS * i..][..WORDS];
        Entry {
            id: w[0],
            prefix: w[1],
        }
    }

    fn set(&mut self, i: usize, e: Entry) {
        let w = &mut self.page.words_mut()[WORDS * i..][..WORDS];
        w[0] = e.id;
        w[1] = e.prefix;
    }

    fn child(&self, i: usize) -> u32 {
        self.page.words()[CHILDREN + i] as u32
    }

    /// The smallest entry under the node.
    fn min(&self) -> Entry {
        self.at(0)
    }

    /// How many of the entries (from `from` on) lie before the target.
    fn before(&self, from: usize, cmp: &impl Fn(Entry) -> Ordering, not_after: bool) -> usize {
        let (mut lo, mut hi) = (from, self.count as usize);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let ord = cmp(self.at(mid));
            let before = ord == Ordering::Less || (not_after && ord == Ordering::Equal);
            if before {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo - from
    }

    /// Where in a leaf the first entry not before the target is.
    fn position(&self, cmp: &impl Fn(Entry) -> Ordering) -> usize {
        self.before(0, cmp, false)
    }

    /// Opens a gap at `pos` and puts `e` (and, in an inner node, `child`) there.
    fn shift_in(&mut self, pos: usize, e: Entry, child: Option<u32>) {
        let count = self.count as usize;
        let words = self.page.words_mut();
        words.copy_within(WORDS * pos..WORDS * count, WORDS * (pos + 1));
        if let Some(child) = child {
            words.copy_within(CHILDREN + pos..CHILDREN + count, CHILDREN + pos + 1);
            words[CHILDREN + pos] = u64::from(child);
        }
        self.set(pos, e);
        self.count += 1;
    }

    /// Closes the gap of entry (and child) `pos`.
    fn shift_out(&mut self, pos: usize, inner: bool) {
        let count = self.count as usize;
        let words = self.page.words_mut();
        words.copy_within(WORDS * (pos + 1)..WORDS * count, WORDS * pos);
        if inner {
            words.copy_within(CHILDREN + pos + 1..CHILDREN + count, CHILDREN + pos);
        }
        self.count -= 1;
    }

    /// Appends entries (and children) `from..from + n` of `src`.
    fn append(&mut self, src: &Node, from: usize, n: usize, inner: bool) {
        let at = self.count as usize;
        let (s, d) = (src.page.words(), self.page.words_mut());
        d[WORDS * at..WORDS * (at + n)].copy_from_slice(&s[WORDS * from..WORDS * (from + n)]);
        if inner {
            d[CHILDREN + at..CHILDREN + at + n]
                .copy_from_slice(&s[CHILDREN + from..CHILDREN + from + n]);
        }
        self.count += n as u32;
    }
}

/// Where a scan stands: a position in a leaf. Valid while the tree is
/// unchanged, which the borrow it comes with guarantees.
#[derive(Debug, Clone, Copy)]
struct At {
    leaf: u32,
    pos: u32,
}

pub(crate) struct OrderedTree {
    /// Entries a leaf holds, children an inner node holds: a page's worth,
    /// or fewer in tests, to reach deep trees with few entries.
    leaf_cap: usize,
    inner_cap: usize,
    nodes: Vec<Option<Node>>,
    free: Vec<u32>,
    root: u32,
    /// Levels of inner nodes above the leaves.
    height: u32,
    entries: u64,
}

impl Default for OrderedTree {
    fn default() -> Self {
        OrderedTree::new()
    }
}

impl OrderedTree {
    pub(crate) fn new() -> OrderedTree {
        OrderedTree::with_caps(LEAF_CAP, INNER_CAP)
    }

    fn with_caps(leaf_cap: usize, inner_cap: usize) -> OrderedTree {
        assert!((4..=LEAF_CAP).contains(&leaf_cap) && (4..=INNER_CAP).contains(&inner_cap));
        OrderedTree {
            leaf_cap,
            inner_cap,
            nodes: Vec::new(),
            free: Vec::new(),
            root: NIL,
            height: 0,
            entries: 0,
        }
    }

    pub(crate) fn entries(&self) -> u64 {
        self.entries
    }

    pub(crate) fn pages_held(&self) -> usize {
        self.nodes.len() - self.free.len()
    }

    fn node(&self, id: u32) -> &Node {
        self.nodes[id as usize].as_ref().expect("a live node")
    }

    fn node_mut(&mut self, id: u32) -> &mut Node {
        self.nodes[id as usize].as_mut().expect("a live node")
    }

    fn add_node(&mut self, page: Page) -> u32 {
        let node = Node {
            page,
            count: 0,
            prev: NIL,
            next: NIL,
        };
        match self.free.pop() {
            Some(id) => {
                self.nodes[id as usize] = Some(node);
                id
            }
            None => {
                self.nodes.push(Some(node));
                self.nodes.len() as u32 - 1
            }
        }
    }

    /// Gives a node's page back to the pool.
    fn free_node(&mut self, id: u32) {
        self.nodes[id as usize] = None;
        self.free.push(id);
    }

    /// The child of inner node `id` whose range holds the target: the last
    /// whose separator is not after it.
    fn child_for(&self, id: u32, cmp: &impl Fn(Entry) -> Ordering) -> usize {
        self.node(id).before(1, cmp, true)
    }

    /// Pages an insert of the entry `cmp` compares against would take: one
    /// for each full node it splits, and one more for a new root.
    pub(crate) fn pages_to_insert(&self, cmp: &impl Fn(Entry) -> Ordering) -> usize {
        if self.root == NIL {
            return 1;
        }
        let mut path = Vec::with_capacity(self.height as usize + 1);
        let mut id = self.root;
        for _ in 0..self.height {
            path.push(id);
            id = self.node(id).child(self.child_for(id, cmp));
        }
        if (self.node(id).count as usize) < self.leaf_cap {
            return 0;
        }
        let mut pages = 1;
        for &inner in path.iter().rev() {
            if (self.node(inner).count as usize) < self.inner_cap {
                return pages;
            }
            pages += 1;
        }
        pages + 1
    }

    /// Inserts `entry`, which `cmp` compares the tree's entries against (it is
    /// never equal to one). A split takes its pages from `spare`; if `spare`
    /// has fewer than it needs, nothing changes and the answer is how many.
    pub(crate) fn insert(
        &mut self,
        entry: Entry,
        cmp: impl Fn(Entry) -> Ordering,
        spare: &mut Vec<Page>,
    ) -> Result<(), usize> {
        if self.root == NIL {
            let page = spare.pop().ok_or(1usize)?;
            let id = self.add_node(page);
            self.node_mut(id).shift_in(0, entry, None);
            self.root = id;
            self.entries = 1;
            return Ok(());
        }
        // The common case, a leaf with room: one descent.
        let mut path = [(NIL, 0usize); MAX_HEIGHT];
        let mut id = self.root;
        for step in path.iter_mut().take(self.height as usize) {
            let j = self.child_for(id, &cmp);
            *step = (id, j);
            id = self.node(id).child(j);
        }
        let leaf = self.node(id);
        if (leaf.count as usize) < self.leaf_cap {
            let pos = leaf.position(&cmp);
            self.node_mut(id).shift_in(pos, entry, None);
            if pos == 0 {
                // The leaf's smallest entry changed: so did its ancestors'
                // separators, up to the first it is not the leftmost under.
                for &(inner, j) in path[..self.height as usize].iter().rev() {
                    self.node_mut(inner).set(j, entry);
                    if j != 0 {
                        break;
                    }
                }
            }
            self.entries += 1;
            return Ok(());
        }
        let need = self.pages_to_insert(&cmp);
        if spare.len() < need {
            return Err(need);
        }
        self.entries += 1;
        let Some((min, right)) = self.insert_under(self.root, self.height, entry, &cmp, spare)
        else {
            return Ok(());
        };
        let old = self.root;
        let root = self.add_node(spare.pop().expect("a page for a new root"));
        let old_min = self.node(old).min();
        let node = self.node_mut(root);
        node.shift_in(0, old_min, Some(old));
        node.shift_in(1, min, Some(right));
        self.root = root;
        self.height += 1;
        assert!(
            (self.height as usize) < MAX_HEIGHT,
            "an ordered index too deep"
        );
        Ok(())
    }

    /// Inserts under node `id` at `level` (0: a leaf); if the node split,
    /// the new right node and its smallest entry.
    fn insert_under(
        &mut self,
        id: u32,
        level: u32,
        entry: Entry,
        cmp: &impl Fn(Entry) -> Ordering,
        spare: &mut Vec<Page>,
    ) -> Option<(Entry, u32)> {
        if level == 0 {
            let pos = self.node(id).position(cmp);
            return self.put(id, pos, self.leaf_cap, entry, None, spare);
        }
        let j = self.child_for(id, cmp);
        let child = self.node(id).child(j);
        let split = self.insert_under(child, level - 1, entry, cmp, spare);
        let child_min = self.node(child).min();
        self.node_mut(id).set(j, child_min);
        let (min, right) = split?;
        self.put(id, j + 1, self.inner_cap, min, Some(right), spare)
    }

    /// Puts `e` (and, in an inner node, `child`) at `pos` of node `id`,
    /// which holds at most `cap`; splits a full node in two, and answers the
    /// new right node and its smallest entry.
    fn put(
        &mut self,
        id: u32,
        pos: usize,
        cap: usize,
        e: Entry,
        child: Option<u32>,
        spare: &mut Vec<Page>,
    ) -> Option<(Entry, u32)> {
        let count = self.node(id).count as usize;
        if count < cap {
            self.node_mut(id).shift_in(pos, e, child);
            return None;
        }
        let right = self.add_node(spare.pop().expect("a page for a split"));
        let half = cap / 2;
        let inner = child.is_some();
        let [left_node, right_node] = self.two_mut(id, right);
        right_node.append(left_node, half, cap - half, inner);
        left_node.count = half as u32;
        if !inner {
            // Leaves: link the new one in after the old.
            right_node.prev = id;
            right_node.next = left_node.next;
            left_node.next = right;
            let after = right_node.next;
            if after != NIL {
                self.node_mut(after).prev = right;
            }
        }
        if pos <= half {
            self.node_mut(id).shift_in(pos, e, child);
        } else {
            self.node_mut(right).shift_in(pos - half, e, child);
        }
        Some((self.node(right).min(), right))
    }

    fn two_mut(&mut self, a: u32, b: u32) -> [&mut Node; 2] {
        let [a, b] = self
            .nodes
            .get_disjoint_mut([a as usize, b as usize])
            .expect("two distinct nodes");
        [
            a.as_mut().expect("a live node"),
            b.as_mut().expect("a live node"),
        ]
    }

    /// Removes `entry`, which `cmp` finds equal; answers whether it was there.
    pub(crate) fn remove(&mut self, entry: Entry, cmp: impl Fn(Entry) -> Ordering) -> bool {
        if self.root == NIL || !self.remove_under(self.root, self.height, entry, &cmp) {
            return false;
        }
        self.entries -= 1;
        let root = self.node(self.root);
        if root.count == 0 {
            self.free_node(self.root);
            self.root = NIL;
            self.height = 0;
        } else if self.height > 0 && root.count == 1 {
            let only = root.child(0);
            self.free_node(self.root);
            self.root = only;
            self.height -= 1;
        }
        true
    }

    fn remove_under(
        &mut self,
        id: u32,
        level: u32,
        entry: Entry,
        cmp: &impl Fn(Entry) -> Ordering,
    ) -> bool {
        if level == 0 {
            let node = self.node_mut(id);
            let pos = node.position(cmp);
            if pos >= node.count as usize || !node.at(pos).same(entry) {
                return false;
            }
            node.shift_out(pos, false);
            return true;
        }
        let j = self.child_for(id, cmp);
        let child = self.node(id).child(j);
        if !self.remove_under(child, level - 1, entry, cmp) {
            return false;
        }
        let leaf = level == 1;
        let cap = if leaf { self.leaf_cap } else { self.inner_cap };
        let child_count = self.node(child).count as usize;
        if child_count == 0 {
            if leaf {
                self.unlink(child);
            }
            self.free_node(child);
            self.node_mut(id).shift_out(j, true);
            return true;
        }
        let child_min = self.node(child).min();
        self.node_mut(id).set(j, child_min);
        if child_count < cap / 4 {
            let count = self.node(id).count as usize;
            let (left, right) = if j + 1 < count {
                (j, j + 1)
            } else {
                (j.saturating_sub(1), j)
            };
            if left != right {
                self.merge(id, left, right, cap, leaf);
            }
        }
        true
    }

    /// Merges child `r` of inner node `id` into child `l` (its left
    /// neighbour) if together they fill at most half a node.
    fn merge(&mut self, id: u32, l: usize, r: usize, cap: usize, leaf: bool) {
        let (left, right) = (self.node(id).child(l), self.node(id).child(r));
        let rc = self.node(right).count as usize;
        if self.node(left).count as usize + rc > cap / 2 {
            return;
        }
        let [to, from] = self.two_mut(left, right);
        to.append(from, 0, rc, !leaf);
        if leaf {
            self.unlink(right);
        }
        self.free_node(right);
        self.node_mut(id).shift_out(r, true);
    }

    fn unlink(&mut self, leaf: u32) {
        let (prev, next) = {
            let n = self.node(leaf);
            (n.prev, n.next)
        };
        if prev != NIL {
            self.node_mut(prev).next = next;
        }
        if next != NIL {
            self.node_mut(next).prev = prev;
        }
    }

    /// Replaces `old` with `new`, which lies in the same place (a row's
    /// committed entry becoming its current one); answers whether `old` was
    /// there.
    pub(crate) fn relabel(
        &mut self,
        old: Entry,
        new: Entry,
        cmp: impl Fn(Entry) -> Ordering,
    ) -> bool {
        if self.root == NIL {
            return false;
        }
        let mut id = self.root;
        for _ in 0..self.height {
            let j = self.child_for(id, &cmp);
            let node = self.node_mut(id);
            if node.at(j).same(old) {
                node.set(j, new);
            }
            id = node.child(j);
        }
        let node = self.node_mut(id);
        let pos = node.position(&cmp);
        if pos >= node.count as usize || !node.at(pos).same(old) {
            return false;
        }
        node.set(pos, new);
        true
    }

    /// The entries from the first that `cmp` does not put before the target,
    /// in order.
    pub(crate) fn from(&self, cmp: impl Fn(Entry) -> Ordering) -> Entries<'_> {
        if self.root == NIL {
            return Entries {
                tree: self,
                at: At { leaf: NIL, pos: 0 },
            };
        }
        let mut id = self.root;
        for _ in 0..self.height {
            id = self.node(id).child(self.child_for(id, &cmp));
        }
        let pos = self.node(id).position(&cmp);
        Entries {
            tree: self,
            at: At {
                leaf: id,
                pos: pos as u32,
            },
        }
    }

    /// About what share of the entries lie before the target `cmp`
    /// compares against: where its descent turns at each level, as if every
    /// child of a node held as many entries. One descent, no entry counted:
    /// enough to tell a narrow range from most of the index.
    pub(crate) fn share_before(&self, cmp: impl Fn(Entry) -> Ordering) -> f64 {
        if self.root == NIL {
            return 0.0;
        }
        let (mut id, mut share, mut width) = (self.root, 0.0, 1.0);
        for _ in 0..self.height {
            let node = self.node(id);
            let i = self.child_for(id, &cmp);
            let children = f64::from(node.count.max(1));
            share += width * i as f64 / children;
            width /= children;
            id = node.child(i);
        }
        let leaf = self.node(id);
        share + width * leaf.position(&cmp) as f64 / f64::from(leaf.count.max(1))
    }

    /// Every entry, in order.
    #[cfg(test)]
    pub(crate) fn all(&self) -> Entries<'_> {
        self.from(|_| Ordering::Greater)
    }

    /// Checks the tree's shape against `order` (which compares two entries)
    /// and its counters: every node but the root at least one entry, every
    /// separator its child's smallest entry, leaves all at one depth and
    /// linked in order, entries in strictly rising order. Answers the entries
    /// counted. For tests of the accounting.
    pub(crate) fn audit(&self, order: impl Fn(Entry, Entry) -> Ordering) -> u64 {
        if self.root == NIL {
            assert_eq!(self.entries, 0);
            assert_eq!(self.pages_held(), 0, "an empty tree holds no page");
            return 0;
        }
        let mut leaves = Vec::new();
        let nodes = self.audit_node(self.root, self.height, &mut leaves);
        assert_eq!(nodes, self.pages_held(), "every page held is in the tree");
        let mut counted = 0;
        let mut last: Option<Entry> = None;
        for (i, &leaf) in leaves.iter().enumerate() {
            let node = self.node(leaf);
            let prev = if i == 0 { NIL } else { leaves[i - 1] };
            let next = leaves.get(i + 1).copied().unwrap_or(NIL);
            assert_eq!((node.prev, node.next), (prev, next), "leaf links");
            for i in 0..node.count as usize {
                let e = node.at(i);
                if let Some(last) = last {
                    assert_eq!(order(last, e), Ordering::Less, "entries in order");
                }
                last = Some(e);
                counted += 1;
            }
        }
        assert_eq!(counted, self.entries, "entry count");
        counted
    }

    fn audit_node(&self, id: u32, level: u32, leaves: &mut Vec<u32>) -> usize {
        let node = self.node(id);
        assert!(node.count > 0 || id == self.root, "no empty node");
        if level == 0 {
            assert!(node.count as usize <= self.leaf_cap);
            leaves.push(id);
            return 1;
        }
        assert!(node.count as usize <= self.inner_cap);
        let mut nodes = 1;
        for j in 0..node.count as usize {
            let child = node.child(j);
            assert_eq!(
                node.at(j),
                self.node(child).min(),
                "separator is the child's min"
            );
            nodes += self.audit_node(child, level - 1, leaves);
        }
        nodes
    }
}

/// Entries in order from a position, while the tree is borrowed.
pub(crate) struct Entries<'a> {
    tree: &'a OrderedTree,
    at: At,
}

impl Iterator for Entries<'_> {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        loop {
            if self.at.leaf == NIL {
                return None;
            }
            let leaf = self.tree.node(self.at.leaf);
            if (self.at.pos as usize) < leaf.count as usize {
                self.at.pos += 1;
                return Some(leaf.at(self.at.pos as usize - 1));
            }
            self.at = At {
                leaf: leaf.next,
                pos: 0,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use proptest::prelude::*;

    use super::*;
    use crate::storage::page::{DataMemory, MemoryAccount, PageSource};

    /// A tree whose entries are ordered by a key kept beside it: row `r`'s
    /// key is `keys[r]`, its committed version's `keys[r] ^ 1` (keys are even).
    struct Model {
        tree: OrderedTree,
        pages: PageSource,
        set: BTreeSet<(u64, Entry)>,
    }

    fn key(e: Entry) -> u64 {
        // Rows' keys are scattered by a multiplication, so the order of
        // rows in the tree is not the order of their numbers.
        let k = u64::from(e.row()).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 8 << 1;
        k | u64::from(e.is_committed())
    }

    fn against(target: Entry) -> impl Fn(Entry) -> Ordering {
        move |e| key(e).cmp(&key(target))
    }

    impl Model {
        fn new(pages: u64, leaf_cap: usize, inner_cap: usize) -> Model {
            let pool = DataMemory::new(pages * PAGE_SIZE as u64).unwrap();
            Model {
                tree: OrderedTree::with_caps(leaf_cap, inner_cap),
                pages: PageSource::new(pool, Arc::new(MemoryAccount::default())),
                set: BTreeSet::new(),
            }
        }

        fn insert(&mut self, e: Entry) -> bool {
            if self.set.contains(&(key(e), e)) {
                return false;
            }
            let mut spare = Vec::new();
            while let Err(need) = self.tree.insert(e, against(e), &mut spare) {
                assert_eq!(need, self.tree.pages_to_insert(&against(e)));
                assert!(spare.len() < need, "asks only for more pages than it has");
                spare.extend((0..need).map(|_| self.pages.alloc().unwrap()));
            }
            assert!(spare.is_empty(), "takes every page it asked for");
            self.set.insert((key(e), e));
            true
        }

        fn remove(&mut self, e: Entry) {
            let was = self.set.remove(&(key(e), e));
            assert_eq!(self.tree.remove(e, against(e)), was);
        }

        fn check(&self) {
            let counted = self.tree.audit(|a, b| key(a).cmp(&key(b)));
            assert_eq!(counted, self.set.len() as u64);
            let all: Vec<Entry> = self.tree.all().collect();
            let want: Vec<Entry> = self.set.iter().map(|&(_, e)| e).collect();
            assert_eq!(all, want);
        }
    }

    #[test]
    fn grows_to_four_levels_and_shrinks_to_nothing() {
        let mut m = Model::new(4000, 8, 4);
        let n = 3000;
        for r in 0..n {
            m.insert(Entry::current(r));
        }
        assert!(m.tree.height >= 3);
        m.check();
        // Scans start anywhere.
        let from = Entry::current(n / 3);
        let got: Vec<Entry> = m.tree.from(against(from)).take(50).collect();
        let want: Vec<Entry> = (m.set.range((key(from), from)..).take(50))
            .map(|&(_, e)| e)
            .collect();
        assert_eq!(got, want);
        for r in (0..n).step_by(2) {
            m.remove(Entry::current(r));
        }
        m.check();
        for r in (1..n).step_by(2) {
            m.remove(Entry::current(r));
        }
        m.check();
        assert_eq!((m.tree.pages_held(), m.tree.height), (0, 0));
    }

    #[test]
    fn the_share_before_a_key_is_about_its_rank() {
        let mut m = Model::new(4000, 16, 8);
        let n = 5000;
        for r in 0..n {
            m.insert(Entry::current(r));
        }
        let sorted: Vec<Entry> = m.set.iter().map(|&(_, e)| e).collect();
        for at in [
            0,
            1,
            n as usize / 10,
            n as usize / 2,
            n as usize * 9 / 10,
            n as usize - 1,
        ] {
            let share = m.tree.share_before(against(sorted[at]));
            let rank = at as f64 / f64::from(n);
            assert!(
                (share - rank).abs() < 0.1,
                "entry {at}: estimated {share}, is {rank}"
            );
        }
        assert_eq!(m.tree.share_before(|_| Ordering::Greater), 0.0);
        assert!(m.tree.share_before(|_| Ordering::Less) > 0.99);
    }

    #[test]
    fn page_sized_nodes_split_and_merge() {
        let mut m = Model::new(100, LEAF_CAP, INNER_CAP);
        let n = (LEAF_CAP * 5) as u32;
        for r in 0..n {
            m.insert(Entry::current(r));
        }
        assert_eq!(m.tree.height, 1);
        m.check();
        for r in 0..n - 10 {
            m.remove(Entry::current(r));
        }
        m.check();
        assert_eq!(m.tree.pages_held(), 1, "the last few entries in one leaf");
    }

    #[test]
    fn ascending_inserts_split_up_to_a_new_root() {
        let mut m = Model::new(4000, 4, 4);
        // Ascending keys fill each leaf before the next: the worst case for
        // a tree that splits in halves.
        let mut rows: Vec<u32> = (0..2000).collect();
        rows.sort_by_key(|&r| key(Entry::current(r)));
        for r in rows {
            m.insert(Entry::current(r));
        }
        m.check();
    }

    #[test]
    fn relabel_keeps_the_place() {
        let mut m = Model::new(1000, 8, 4);
        for r in 0..1000 {
            m.insert(Entry::current(r));
        }
        // Row 77's committed version sorts right after its current one.
        let (cur, com) = (Entry::current(77), Entry::committed(77));
        m.insert(com);
        m.remove(cur);
        assert!(m.tree.relabel(com, cur, |e| {
            // Both compare as the committed key.
            let k = |e: Entry| if e.row() == 77 { key(com) } else { key(e) };
            k(e).cmp(&key(com))
        }));
        assert!(m.tree.all().any(|e| e == cur));
        assert!(!m.tree.all().any(|e| e == com));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn matches_an_ordered_set(
            leaf_cap in 4usize..12,
            inner_cap in 4usize..8,
            ops in proptest::collection::vec((any::<bool>(), 0u32..3_000, any::<bool>()), 1..600),
        ) {
            let mut m = Model::new(4000, leaf_cap, inner_cap);
            for (add, row, committed) in ops {
                let e = if committed { Entry::committed(row) } else { Entry::current(row) };
                // Inserts come in small runs, so trees grow several levels.
                if add {
                    for r in row..row + 5 {
                        m.insert(Entry::current(r));
                    }
                    m.insert(e);
                } else {
                    m.remove(e);
                    m.remove(Entry::current(row / 2));
                    m.remove(Entry::current(row + 1));
                }
            }
            m.check();
        }
    }
}
