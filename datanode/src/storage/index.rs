//! The primary-key hash index of a fragment, in DataMemory pages.
//!
//! Extendible hashing: a directory of `2^depth` slots names index pages by the
//! top bits of a key's 32-bit tag; each page is an open-addressing table of
//! 4096 entries with linear probing, started at the tag's low 12 bits. An
//! entry is `tag << 32 | row`. A page past three quarters full splits in two
//! by its next tag bit, so growth costs one page at a time and never a pause to
//! rehash the whole fragment; two buddy pages under a quarter full merge again,
//! and the last page goes back when the fragment is empty.
//!
//! The tag comes from a hash keyed with a per-process secret, so a tenant
//! cannot choose keys that pile into one page.

use std::cell::RefCell;

use super::StorageError;
use super::fixed::RowRef;
use super::image::{ImageError, ImagePage, ImageReader, ImageWriter};
use super::page::{PAGE_SIZE, Page, PageSource};

const SLOTS: usize = PAGE_SIZE / 8;
const SLOT_MASK: u32 = SLOTS as u32 - 1;
const EMPTY: u64 = u64::MAX;
/// Bytes of one index entry.
pub(crate) const ENTRY: usize = 8;
/// A page splits when an insert would take it past this many entries.
const SPLIT_AT: u32 = SLOTS as u32 * 3 / 4;
/// Two buddies merge when together they hold at most this many.
const MERGE_AT: u32 = SLOTS as u32 / 4;
/// Deepest directory: tag bits above the 12 used for probing.
const MAX_DEPTH: u8 = 20;

thread_local! {
    /// Room for a page's entries while it splits or merges.
    static MOVING: RefCell<Vec<u64>> = RefCell::new(Vec::with_capacity(SLOTS));
}

struct IndexPage {
    page: Page,
    depth: u8,
    count: u32,
}

impl ImagePage for IndexPage {
    fn page(&self) -> &Page {
        &self.page
    }

    fn page_mut(&mut self) -> &mut Page {
        &mut self.page
    }

    fn write_head(&self, w: &mut ImageWriter<'_>) {
        w.u8(self.depth);
        w.u32(self.count);
    }

    fn read_head(r: &mut ImageReader<'_>, page: Page) -> Result<IndexPage, ImageError> {
        Ok(IndexPage {
            page,
            depth: r.u8()?,
            count: r.u32()?,
        })
    }
}

impl IndexPage {
    fn new(pages: &PageSource, depth: u8) -> Result<IndexPage, StorageError> {
        let mut page = pages.alloc()?;
        page.words_mut().fill(EMPTY);
        Ok(IndexPage {
            page,
            depth,
            count: 0,
        })
    }

    fn put(&mut self, entry: u64) {
        let words = self.page.words_mut();
        let mut at = (entry >> 32) as u32 & SLOT_MASK;
        while words[at as usize] != EMPTY {
            at = (at + 1) & SLOT_MASK;
        }
        words[at as usize] = entry;
        self.count += 1;
    }

    /// Removes the entry at `at`, shifting later entries of its probe run back
    /// so no tombstone is left.
    fn take(&mut self, mut at: u32) {
        let words = self.page.words_mut();
        let mut next = at;
        loop {
            next = (next + 1) & SLOT_MASK;
            let e = words[next as usize];
            if e == EMPTY {
                break;
            }
            let home = (e >> 32) as u32 & SLOT_MASK;
            // Move `e` into the hole unless its home lies cyclically in (at, next].
            let stays = if at <= next {
                at < home && home <= next
            } else {
                at < home || home <= next
            };
            if !stays {
                words[at as usize] = e;
                at = next;
            }
        }
        words[at as usize] = EMPTY;
        self.count -= 1;
    }

    /// Empties the page into `out`.
    fn drain(&mut self, out: &mut Vec<u64>) {
        for w in self.page.words_mut().iter_mut() {
            if *w != EMPTY {
                out.push(*w);
                *w = EMPTY;
            }
        }
        self.count = 0;
    }
}

pub(crate) struct HashIndex {
    /// Page positions by the top `depth` bits of the tag.
    dir: Vec<u32>,
    depth: u8,
    pages: Vec<Option<IndexPage>>,
    holes: Vec<u32>,
    /// Pages whose depth equals the directory's: while any exist, the
    /// directory cannot halve.
    at_full_depth: u32,
    entries: u64,
}

impl HashIndex {
    pub(crate) fn new() -> HashIndex {
        HashIndex {
            dir: Vec::new(),
            depth: 0,
            pages: Vec::new(),
            holes: Vec::new(),
            at_full_depth: 0,
            entries: 0,
        }
    }

    pub(crate) fn entries(&self) -> u64 {
        self.entries
    }

    pub(crate) fn pages_held(&self) -> usize {
        self.pages.len() - self.holes.len()
    }

    #[inline]
    fn slot_of(&self, tag: u32) -> usize {
        if self.depth == 0 {
            0
        } else {
            (tag >> (32 - self.depth)) as usize
        }
    }

    #[inline]
    fn page_for(&self, tag: u32) -> usize {
        self.dir[self.slot_of(tag)] as usize
    }

    /// Prefetches the cache line where a probe for `tag` starts.
    #[inline]
    pub(crate) fn prefetch(&self, tag: u32) {
        if self.dir.is_empty() {
            return;
        }
        if let Some(page) = &self.pages[self.page_for(tag)] {
            super::page::prefetch(&page.page.words()[(tag & SLOT_MASK) as usize]);
        }
    }

    /// The row whose entry has this tag and for which `is_key` holds.
    #[inline]
    pub(crate) fn find(&self, tag: u32, mut is_key: impl FnMut(RowRef) -> bool) -> Option<RowRef> {
        if self.dir.is_empty() {
            return None;
        }
        let page = self.pages[self.page_for(tag)]
            .as_ref()
            .expect("directory names held pages");
        let words = page.page.words();
        let mut at = tag & SLOT_MASK;
        loop {
            let e = words[at as usize];
            if e == EMPTY {
                return None;
            }
            if (e >> 32) as u32 == tag && is_key(e as u32) {
                return Some(e as u32);
            }
            at = (at + 1) & SLOT_MASK;
        }
    }

    /// Adds an entry. Takes a new page only to split one past three quarters
    /// full; if the pool has none, the entry still goes in while the page has
    /// room. On error nothing has changed.
    pub(crate) fn insert(
        &mut self,
        pages: &PageSource,
        tag: u32,
        row: RowRef,
    ) -> Result<(), StorageError> {
        if self.dir.is_empty() {
            self.pages.push(Some(IndexPage::new(pages, 0)?));
            self.dir.push(0);
            self.at_full_depth = 1;
        }
        let mut pos = self.page_for(tag);
        loop {
            let page = self.pages[pos].as_ref().expect("held");
            let (count, depth) = (page.count, page.depth);
            if count < SPLIT_AT {
                break;
            }
            let split = if depth < MAX_DEPTH {
                self.split(pages, pos, tag)
            } else {
                Err(StorageError::FragmentFull)
            };
            match split {
                Ok(()) => pos = self.page_for(tag),
                // Fuller than we like, but still room: better than failing.
                Err(_) if count < SLOTS as u32 - 1 => break,
                Err(e) => return Err(e),
            }
        }
        self.pages[pos]
            .as_mut()
            .expect("held")
            .put(u64::from(tag) << 32 | u64::from(row));
        self.entries += 1;
        Ok(())
    }

    /// Removes the entry for `row`, which must be present under `tag`.
    pub(crate) fn remove(&mut self, tag: u32, row: RowRef) {
        let pos = self.page_for(tag);
        let page = self.pages[pos].as_mut().expect("held");
        let want = u64::from(tag) << 32 | u64::from(row);
        let words = page.page.words();
        let mut at = tag & SLOT_MASK;
        while words[at as usize] != want {
            debug_assert_ne!(
                words[at as usize], EMPTY,
                "removing an entry that is not there"
            );
            at = (at + 1) & SLOT_MASK;
        }
        page.take(at);
        self.entries -= 1;
        if self.entries == 0 {
            // The fragment is empty: give every index page back.
            *self = HashIndex::new();
            return;
        }
        self.merge(pos, tag);
    }

    /// Splits page `pos`, which holds `tag`, by its next tag bit into itself
    /// and a new page.
    fn split(&mut self, pages: &PageSource, pos: usize, tag: u32) -> Result<(), StorageError> {
        let depth = self.pages[pos].as_ref().expect("held").depth;
        let mut buddy = IndexPage::new(pages, depth + 1)?;
        if depth == self.depth {
            // Double the directory: every slot becomes two with the same page.
            self.dir = self.dir.iter().flat_map(|&p| [p, p]).collect();
            self.depth += 1;
            self.at_full_depth = 0;
            for p in self.pages.iter().flatten() {
                if p.depth == self.depth {
                    self.at_full_depth += 1;
                }
            }
        }
        let bit = 31 - depth as u32;
        let page = self.pages[pos].as_mut().expect("held");
        page.depth += 1;
        MOVING.with_borrow_mut(|moving| {
            moving.clear();
            page.drain(moving);
            for &e in moving.iter() {
                if (e >> 32) as u32 >> bit & 1 == 1 {
                    buddy.put(e);
                } else {
                    page.put(e);
                }
            }
        });
        let buddy_pos = self.hold(buddy);
        // The slots of the old page whose tag has the bit set now name the buddy.
        let span = 1usize << (self.depth - depth - 1);
        let first = self.first_slot(tag, depth);
        for slot in &mut self.dir[first + span..first + 2 * span] {
            *slot = buddy_pos as u32;
        }
        if depth + 1 == self.depth {
            self.at_full_depth += 2;
        }
        Ok(())
    }

    /// The first directory slot naming the page of `tag`, whose depth is `depth`.
    fn first_slot(&self, tag: u32, depth: u8) -> usize {
        let span = 1usize << (self.depth - depth);
        self.slot_of(tag) / span * span
    }

    fn hold(&mut self, page: IndexPage) -> usize {
        match self.holes.pop() {
            Some(pos) => {
                self.pages[pos as usize] = Some(page);
                pos as usize
            }
            None => {
                self.pages.push(Some(page));
                self.pages.len() - 1
            }
        }
    }

    /// Merges page `pos`, which holds `tag`, with its buddy when both are
    /// small, then halves the directory while no page needs its full depth.
    fn merge(&mut self, pos: usize, tag: u32) {
        let page = self.pages[pos].as_ref().expect("held");
        let depth = page.depth;
        if depth == 0 || page.count > MERGE_AT {
            return;
        }
        let span = 1usize << (self.depth - depth);
        let buddy_first = self.first_slot(tag, depth) ^ span;
        let buddy_pos = self.dir[buddy_first] as usize;
        let buddy = self.pages[buddy_pos].as_ref().expect("held");
        if buddy.depth != depth || buddy.count + page.count > MERGE_AT {
            return;
        }
        let mut buddy = self.pages[buddy_pos].take().expect("held");
        self.holes.push(buddy_pos as u32);
        let page = self.pages[pos].as_mut().expect("held");
        page.depth -= 1;
        MOVING.with_borrow_mut(|moving| {
            moving.clear();
            buddy.drain(moving);
            for &e in moving.iter() {
                page.put(e);
            }
        });
        drop(buddy);
        for slot in &mut self.dir[buddy_first..buddy_first + span] {
            *slot = pos as u32;
        }
        if depth == self.depth {
            self.at_full_depth -= 2;
        }
        while self.depth > 0 && self.at_full_depth == 0 {
            self.dir = self.dir.iter().step_by(2).copied().collect();
            self.depth -= 1;
            self.at_full_depth = self
                .pages
                .iter()
                .flatten()
                .filter(|p| p.depth == self.depth)
                .count() as u32;
        }
    }

    /// Writes the index's pages and directory into a fragment image.
    pub(crate) fn write_image(&self, w: &mut ImageWriter<'_>) {
        w.list(&self.dir);
        w.u8(self.depth);
        w.pages(&self.pages);
        w.list(&self.holes);
        w.u32(self.at_full_depth);
        w.u64(self.entries);
    }

    /// Reads an index back from a fragment image, in new pages from `pages`.
    pub(crate) fn read_image(
        r: &mut ImageReader<'_>,
        pages: &PageSource,
    ) -> Result<HashIndex, ImageError> {
        let mut index = HashIndex::new();
        let max_dir = 1usize << MAX_DEPTH;
        let dir = r.list(max_dir, u32::MAX)?;
        index.depth = r.u8()?;
        if index.depth > MAX_DEPTH || (!dir.is_empty() && dir.len() != 1 << index.depth) {
            return Err("the index directory does not match its depth".into());
        }
        index.pages = r.pages(max_dir, pages)?;
        let len = index.pages.len();
        if dir.iter().any(|&p| p as usize >= len) {
            return Err("the index names pages it does not have".into());
        }
        index.dir = dir;
        index.holes = r.list(len, len as u32)?;
        index.at_full_depth = r.u32()?;
        index.entries = r.u64()?;
        Ok(index)
    }

    /// Checks every page's count, every entry's page and the directory;
    /// returns the entries. For tests of the accounting.
    pub(crate) fn audit(&self) -> u64 {
        let mut total = 0;
        for (pos, p) in self.pages.iter().enumerate() {
            let Some(p) = p else { continue };
            let mut count = 0;
            for &e in p.page.words() {
                if e != EMPTY {
                    count += 1;
                    assert_eq!(
                        self.page_for((e >> 32) as u32),
                        pos,
                        "entry in the wrong page"
                    );
                }
            }
            assert_eq!(count, p.count, "an index page's count is off");
            let span = 1usize << (self.depth - p.depth);
            let naming = self.dir.iter().filter(|&&d| d as usize == pos).count();
            assert_eq!(naming, span, "directory slots of a page are off");
            total += u64::from(count);
        }
        let full = self
            .pages
            .iter()
            .flatten()
            .filter(|p| p.depth == self.depth)
            .count() as u32;
        assert_eq!(full, self.at_full_depth);
        assert_eq!(total, self.entries);
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::page::DataMemory;

    /// A well-spread tag for row `i`.
    fn tag(i: u32) -> u32 {
        (i.wrapping_mul(0x9E37_79B9)) ^ (i >> 7)
    }

    #[test]
    fn grows_by_splitting_and_shrinks_by_merging() {
        let pool = DataMemory::new(64 * PAGE_SIZE as u64).unwrap();
        let pages = PageSource::new(pool.clone(), Default::default());
        let mut index = HashIndex::new();
        let n = 20_000u32;
        for i in 0..n {
            index.insert(&pages, tag(i), i).unwrap();
        }
        assert_eq!(index.audit(), u64::from(n));
        assert!(
            index.pages_held() >= 7 && index.pages_held() <= 16,
            "{} pages",
            index.pages_held()
        );
        for i in 0..n {
            assert_eq!(index.find(tag(i), |r| r == i), Some(i));
        }
        assert_eq!(index.find(tag(n), |_| true), None);
        for i in 0..n - 10 {
            index.remove(tag(i), i);
        }
        index.audit();
        assert_eq!(index.pages_held(), 1, "merged back to one page");
        for i in n - 10..n {
            index.remove(tag(i), i);
        }
        assert_eq!(pool.used_pages(), 0, "an empty index holds no page");
    }

    #[test]
    fn equal_tags_are_told_apart_by_the_key() {
        let pool = DataMemory::new(4 * PAGE_SIZE as u64).unwrap();
        let pages = PageSource::new(pool.clone(), Default::default());
        let mut index = HashIndex::new();
        for row in 0..100 {
            index.insert(&pages, 7, row).unwrap();
        }
        assert_eq!(index.find(7, |r| r == 63), Some(63));
        index.remove(7, 50);
        assert_eq!(index.find(7, |r| r == 50), None);
        assert_eq!(index.find(7, |r| r == 99), Some(99));
        assert_eq!(index.audit(), 99);
    }

    #[test]
    fn without_a_page_to_split_into_a_page_fills_up_then_refuses() {
        let pool = DataMemory::new(PAGE_SIZE as u64).unwrap();
        let pages = PageSource::new(pool.clone(), Default::default());
        let mut index = HashIndex::new();
        let mut inserted = 0;
        let err = loop {
            match index.insert(&pages, tag(inserted), inserted) {
                Ok(()) => inserted += 1,
                Err(e) => break e,
            }
        };
        assert!(matches!(err, StorageError::OutOfDataMemory(_)));
        assert_eq!(inserted, SLOTS as u32 - 1);
        assert_eq!(index.audit(), u64::from(inserted));
    }
}
