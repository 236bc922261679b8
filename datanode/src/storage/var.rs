//! Var-part pages: variable-size entries, as RonDB's var pages keep them.
//!
//! Entries grow from the start of the page, a directory of 4-byte entries
//! grows down from its end:
//! ```text
//! [entry][entry][hole][entry] ... gap ... [dir n-1]...[dir 1][dir 0]
//! ```
//! A directory entry is `offset u16 | len u16 << 16`; a free one has len
//! `0xFFFF` and keeps the next free directory entry in its offset. An entry is
//! named by a [`VarRef`]: the page's position in the fragment (upper 20 bits)
//! and its directory index (lower 12 bits), so entries can move inside their
//! page without their row noticing. Freed bytes become holes; when a new entry
//! needs them, the page is compacted. Holes count as room only once a page
//! has gathered `COMPACT_HOLES` bytes of them: compacting moves the whole
//! page, and an update writes its new var part beside the committed one, so
//! a page whose holes came one entry at a time would otherwise be compacted
//! for every entry written into it. Pages are kept in lists by how many bytes
//! they can still take, so free space anywhere in the fragment is reused.

use std::cell::RefCell;

use super::StorageError;
use super::image::{ImageError, ImagePage, ImageReader, ImageWriter};
use super::page::{PAGE_SIZE, Page, PageSource};

/// An entry's place in its fragment: page position << 12 | directory index.
pub(crate) type VarRef = u32;

const DIR_BITS: u32 = 12;
const DIR_MASK: u32 = (1 << DIR_BITS) - 1;
/// Most directory entries in a page.
const MAX_DIR: usize = 1 << DIR_BITS;
/// Most pages a fragment's var part can hold: 2^20 pages, 32 GiB.
const MAX_PAGES: usize = 1 << (32 - DIR_BITS);
/// Bytes of one directory entry.
pub(crate) const DIR_ENTRY: usize = 4;
const FREE_LEN: u16 = u16::MAX;
const NO_DIR: u16 = u16::MAX;
/// Free-space classes: class `c` holds pages that can take at least `2^c` bytes.
const CLASSES: usize = 16;
/// Pages that can take fewer bytes than this are in no list.
const MIN_LISTED: usize = 8;
const NOT_LISTED: u8 = u8::MAX;
/// Holes a page must have before they count as room (1/16 of the page):
/// what a compaction frees then pays for its copying many times over.
const COMPACT_HOLES: usize = PAGE_SIZE / 16;
/// How many pages of the one class that might fit are tried before a new page.
const PARTIAL_FIT_TRIES: usize = 8;

thread_local! {
    /// Room to copy a page's entries into while compacting it.
    static COMPACT: RefCell<Vec<u8>> = RefCell::new(vec![0; PAGE_SIZE]);
}

struct VarPage {
    page: Page,
    /// Directory entries in use or free; the directory takes `4 * n_dir` bytes.
    n_dir: u16,
    /// First free directory entry, or `NO_DIR`.
    free_dir: u16,
    /// End of the entry area: entries and holes lie below it.
    data_end: u16,
    /// Bytes below `data_end` that belong to no entry.
    holes: u16,
    live: u16,
    class: u8,
    /// Position in `lists[class]`.
    list_pos: u32,
}

impl ImagePage for VarPage {
    fn page(&self) -> &Page {
        &self.page
    }

    fn page_mut(&mut self) -> &mut Page {
        &mut self.page
    }

    fn write_head(&self, w: &mut ImageWriter<'_>) {
        w.u16(self.n_dir);
        w.u16(self.free_dir);
        w.u16(self.data_end);
        w.u16(self.holes);
        w.u16(self.live);
        w.u8(self.class);
        w.u32(self.list_pos);
    }

    fn read_head(r: &mut ImageReader<'_>, page: Page) -> Result<VarPage, ImageError> {
        let p = VarPage {
            page,
            n_dir: r.u16()?,
            free_dir: r.u16()?,
            data_end: r.u16()?,
            holes: r.u16()?,
            live: r.u16()?,
            class: r.u8()?,
            list_pos: r.u32()?,
        };
        if p.n_dir as usize > MAX_DIR
            || p.data_end as usize > PAGE_SIZE
            || (p.class as usize >= CLASSES && p.class != NOT_LISTED)
        {
            return Err("a var page's bookkeeping is out of range".into());
        }
        Ok(p)
    }
}

impl VarPage {
    fn dir(&self, i: usize) -> (usize, u16) {
        let at = PAGE_SIZE - DIR_ENTRY * (i + 1);
        let e = u32::from_le_bytes(self.page.bytes()[at..at + 4].try_into().expect("4 bytes"));
        ((e & 0xffff) as usize, (e >> 16) as u16)
    }

    fn set_dir(&mut self, i: usize, offset: usize, len: u16) {
        let at = PAGE_SIZE - DIR_ENTRY * (i + 1);
        let e = offset as u32 | u32::from(len) << 16;
        self.page.bytes_mut()[at..at + 4].copy_from_slice(&e.to_le_bytes());
    }

    /// Contiguous free bytes between the entries and the directory.
    fn gap(&self) -> usize {
        PAGE_SIZE - DIR_ENTRY * self.n_dir as usize - self.data_end as usize
    }

    /// Bytes a new entry may take here, counting a new directory entry; holes
    /// only once there are enough of them to be worth a compaction.
    fn usable(&self) -> usize {
        let dir_cost = if self.free_dir != NO_DIR {
            0
        } else if self.n_dir as usize == MAX_DIR {
            return 0;
        } else {
            DIR_ENTRY
        };
        let holes = if self.holes as usize >= COMPACT_HOLES {
            self.holes as usize
        } else {
            0
        };
        (self.gap() + holes).saturating_sub(dir_cost)
    }

    /// Moves every entry down so all holes join the gap.
    fn compact(&mut self) {
        COMPACT.with_borrow_mut(|scratch| {
            let end = self.data_end as usize;
            scratch[..end].copy_from_slice(&self.page.bytes()[..end]);
            let mut to = 0;
            for i in 0..self.n_dir as usize {
                let (from, len) = self.dir(i);
                if len == FREE_LEN {
                    continue;
                }
                let len16 = len;
                let len = len as usize;
                self.page.bytes_mut()[to..to + len].copy_from_slice(&scratch[from..from + len]);
                self.set_dir(i, to, len16);
                to += len;
            }
            self.data_end = to as u16;
            self.holes = 0;
        });
    }

    /// Whether the entry at `offset` can grow from `old_len` to `new_len`
    /// bytes in this page: into the gap, or into holes enough to be worth
    /// a compaction (`COMPACT_HOLES`). Compacting a page for the few bytes
    /// one entry left would copy the page for every entry that grows.
    fn can_grow(&self, offset: usize, old_len: usize, new_len: usize) -> bool {
        let (gap, holes) = match offset + old_len == self.data_end as usize {
            true => (self.gap() + old_len, self.holes as usize),
            false => (self.gap(), self.holes as usize + old_len),
        };
        gap >= new_len || (holes >= COMPACT_HOLES && gap + holes >= new_len)
    }

    /// Bytes an entry of `old_len` bytes here could grow to once the page
    /// is compacted.
    fn room_compacted(&self, old_len: usize) -> usize {
        self.gap() + self.holes as usize + old_len
    }

    /// Moves entry `i` (at `offset`, `old_len` bytes) to the end of the
    /// entry area with its new, longer `bytes`, compacting if need be. The
    /// caller made sure the page has room.
    fn grow(&mut self, i: usize, offset: usize, old_len: usize, bytes: &[u8]) {
        self.release_bytes(offset, old_len);
        // Out of the way of compaction, but not on the free chain.
        self.set_dir(i, 0, FREE_LEN);
        let at = self.place(i, bytes.len());
        self.page.bytes_mut()[at..at + bytes.len()].copy_from_slice(bytes);
    }

    /// Places `len` bytes at the end of the entry area under directory entry
    /// `i`, compacting first if the gap is too small. The caller made sure the
    /// page has room.
    fn place(&mut self, i: usize, len: usize) -> usize {
        if self.gap() < len {
            self.compact();
        }
        let offset = self.data_end as usize;
        self.data_end += len as u16;
        self.set_dir(i, offset, len as u16);
        offset
    }

    /// Gives up the bytes of the entry at `offset`.
    fn release_bytes(&mut self, offset: usize, len: usize) {
        if offset + len == self.data_end as usize {
            self.data_end -= len as u16;
        } else {
            self.holes += len as u16;
        }
    }
}

fn class_of(usable: usize) -> u8 {
    if usable < MIN_LISTED {
        NOT_LISTED
    } else {
        usable.ilog2() as u8
    }
}

#[inline]
fn split(r: VarRef) -> (usize, usize) {
    ((r >> DIR_BITS) as usize, (r & DIR_MASK) as usize)
}

pub(crate) struct VarPart {
    pages: Vec<Option<VarPage>>,
    holes: Vec<u32>,
    lists: [Vec<u32>; CLASSES],
    /// Bytes of live entries and their directory entries.
    live_bytes: u64,
}

impl VarPart {
    pub(crate) fn new() -> VarPart {
        VarPart {
            pages: Vec::new(),
            holes: Vec::new(),
            lists: Default::default(),
            live_bytes: 0,
        }
    }

    pub(crate) fn pages_held(&self) -> usize {
        self.pages.len() - self.holes.len()
    }

    pub(crate) fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    fn page(&self, pos: usize) -> &VarPage {
        self.pages[pos].as_ref().expect("entry's page is held")
    }

    fn page_mut(&mut self, pos: usize) -> &mut VarPage {
        self.pages[pos].as_mut().expect("entry's page is held")
    }

    /// Prefetches an entry's directory entry.
    #[inline]
    pub(crate) fn prefetch(&self, r: VarRef) {
        let (pos, i) = split(r);
        if let Some(Some(p)) = self.pages.get(pos) {
            super::page::prefetch(&p.page.bytes()[PAGE_SIZE - DIR_ENTRY * (i + 1)]);
        }
    }

    /// Prefetches an entry's first bytes; reads its directory entry.
    #[inline]
    pub(crate) fn prefetch_data(&self, r: VarRef) {
        let (pos, i) = split(r);
        if let Some(Some(p)) = self.pages.get(pos)
            && i < p.n_dir as usize
        {
            let (offset, _) = p.dir(i);
            super::page::prefetch(&p.page.bytes()[offset.min(PAGE_SIZE - 1)]);
        }
    }

    #[inline]
    pub(crate) fn get(&self, r: VarRef) -> &[u8] {
        let (pos, i) = split(r);
        let p = self.page(pos);
        let (offset, len) = p.dir(i);
        &p.page.bytes()[offset..offset + len as usize]
    }

    /// Stores a new entry, reusing free space where any page has enough.
    pub(crate) fn insert(
        &mut self,
        pages: &PageSource,
        bytes: &[u8],
    ) -> Result<VarRef, StorageError> {
        let len = bytes.len();
        let pos = match self.find_page(len) {
            Some(pos) => pos,
            None => self.add_page(pages)?,
        };
        let p = self.page_mut(pos);
        // A new directory entry comes out of the gap: make room for it first.
        let new_dir = p.free_dir == NO_DIR;
        if new_dir && p.gap() < len + DIR_ENTRY {
            p.compact();
        }
        let i = if new_dir {
            p.n_dir += 1;
            p.n_dir as usize - 1
        } else {
            let i = p.free_dir as usize;
            p.free_dir = p.dir(i).0 as u16;
            i
        };
        let offset = p.place(i, len);
        p.page.bytes_mut()[offset..offset + len].copy_from_slice(bytes);
        p.live += 1;
        self.live_bytes += (len + DIR_ENTRY) as u64;
        self.reclassify(pos);
        Ok((pos as u32) << DIR_BITS | i as u32)
    }

    /// Replaces an entry's bytes: in place when it shrinks or its page has
    /// room, else in another page. On error nothing has changed.
    pub(crate) fn replace(
        &mut self,
        pages: &PageSource,
        r: VarRef,
        bytes: &[u8],
    ) -> Result<VarRef, StorageError> {
        let (pos, i) = split(r);
        let new_len = bytes.len();
        let p = self.page_mut(pos);
        let (offset, old_len) = p.dir(i);
        let old_len = old_len as usize;
        if new_len <= old_len {
            p.page.bytes_mut()[offset..offset + new_len].copy_from_slice(bytes);
            p.set_dir(i, offset, new_len as u16);
            p.release_bytes(offset + new_len, old_len - new_len);
        } else if p.can_grow(offset, old_len, new_len) {
            p.grow(i, offset, old_len, bytes);
        } else {
            // Another page — unless none can be had and this one has room
            // once compacted.
            match self.insert(pages, bytes) {
                Ok(moved) => {
                    self.free(r);
                    return Ok(moved);
                }
                Err(StorageError::OutOfDataMemory(_))
                    if self.page(pos).room_compacted(old_len) >= new_len =>
                {
                    self.page_mut(pos).grow(i, offset, old_len, bytes);
                }
                Err(e) => return Err(e),
            }
        }
        self.live_bytes = self.live_bytes + new_len as u64 - old_len as u64;
        self.reclassify(pos);
        Ok(r)
    }

    /// Frees an entry; a page left without entries goes back to the pool.
    pub(crate) fn free(&mut self, r: VarRef) {
        let (pos, i) = split(r);
        let p = self.page_mut(pos);
        let (offset, len) = p.dir(i);
        p.release_bytes(offset, len as usize);
        let next = p.free_dir;
        p.set_dir(i, next as usize, FREE_LEN);
        p.free_dir = i as u16;
        p.live -= 1;
        let empty = p.live == 0;
        self.live_bytes -= (len as usize + DIR_ENTRY) as u64;
        if empty {
            self.unlist(pos);
            self.pages[pos] = None;
            self.holes.push(pos as u32);
        } else {
            self.reclassify(pos);
        }
    }

    /// A page that can take `len` more bytes: the smallest class that surely
    /// fits, else a few pages of the class that may.
    fn find_page(&self, len: usize) -> Option<usize> {
        let sure = len.max(1).next_power_of_two().ilog2() as usize;
        if let Some(&pos) = self.lists.get(sure..)?.iter().find_map(|l| l.last()) {
            return Some(pos as usize);
        }
        let maybe = len.max(1).ilog2() as usize;
        self.lists[maybe]
            .iter()
            .rev()
            .take(PARTIAL_FIT_TRIES)
            .map(|&pos| pos as usize)
            .find(|&pos| self.page(pos).usable() >= len)
    }

    fn add_page(&mut self, pages: &PageSource) -> Result<usize, StorageError> {
        if self.holes.is_empty() && self.pages.len() >= MAX_PAGES {
            return Err(StorageError::FragmentFull);
        }
        let vp = VarPage {
            page: pages.alloc()?,
            n_dir: 0,
            free_dir: NO_DIR,
            data_end: 0,
            holes: 0,
            live: 0,
            class: NOT_LISTED,
            list_pos: 0,
        };
        Ok(match self.holes.pop() {
            Some(pos) => {
                self.pages[pos as usize] = Some(vp);
                pos as usize
            }
            None => {
                self.pages.push(Some(vp));
                self.pages.len() - 1
            }
        })
    }

    fn unlist(&mut self, pos: usize) {
        let p = self.page_mut(pos);
        let (class, at) = (p.class, p.list_pos as usize);
        if class == NOT_LISTED {
            return;
        }
        p.class = NOT_LISTED;
        let list = &mut self.lists[class as usize];
        list.swap_remove(at);
        if let Some(&moved) = list.get(at) {
            self.page_mut(moved as usize).list_pos = at as u32;
        }
    }

    fn reclassify(&mut self, pos: usize) {
        let p = self.page(pos);
        let class = class_of(p.usable());
        if class == p.class {
            return;
        }
        self.unlist(pos);
        if class != NOT_LISTED {
            let list = &mut self.lists[class as usize];
            list.push(pos as u32);
            let at = list.len() as u32 - 1;
            let p = self.page_mut(pos);
            p.class = class;
            p.list_pos = at;
        }
    }

    /// Writes the part's pages and bookkeeping into a fragment image.
    pub(crate) fn write_image(&self, w: &mut ImageWriter<'_>) {
        w.pages(&self.pages);
        w.list(&self.holes);
        for list in &self.lists {
            w.list(list);
        }
        w.u64(self.live_bytes);
    }

    /// Reads a part back from a fragment image, in new pages from `pages`.
    pub(crate) fn read_image(
        r: &mut ImageReader<'_>,
        pages: &PageSource,
    ) -> Result<VarPart, ImageError> {
        let mut part = VarPart::new();
        part.pages = r.pages(MAX_PAGES, pages)?;
        let len = part.pages.len();
        part.holes = r.list(len, len as u32)?;
        for list in &mut part.lists {
            *list = r.list(len, len as u32)?;
        }
        part.live_bytes = r.u64()?;
        Ok(part)
    }

    /// Walks every page, checking its directory, holes and list against its
    /// counters; returns the live bytes. For tests of the accounting.
    pub(crate) fn audit(&self) -> u64 {
        let mut total = 0u64;
        for (pos, p) in self.pages.iter().enumerate() {
            let Some(p) = p else { continue };
            let mut live = 0;
            let mut bytes = 0usize;
            for i in 0..p.n_dir as usize {
                let (offset, len) = p.dir(i);
                if len != FREE_LEN {
                    assert!(
                        offset + len as usize <= p.data_end as usize,
                        "entry past the data end"
                    );
                    live += 1;
                    bytes += len as usize;
                }
            }
            let mut free_chain = 0;
            let mut at = p.free_dir;
            while at != NO_DIR {
                free_chain += 1;
                at = p.dir(at as usize).0 as u16;
            }
            assert_eq!(live, p.live, "a var page's live count is off");
            assert!(live > 0, "an empty var page was kept");
            assert_eq!(free_chain + live, p.n_dir, "free directory chain is off");
            assert_eq!(
                bytes + p.holes as usize,
                p.data_end as usize,
                "holes are off"
            );
            let used = DIR_ENTRY * p.n_dir as usize + p.data_end as usize;
            assert!(used <= PAGE_SIZE, "entries run into the directory");
            assert_eq!(p.class, class_of(p.usable()), "page in the wrong free list");
            if p.class != NOT_LISTED {
                assert_eq!(
                    self.lists[p.class as usize][p.list_pos as usize],
                    pos as u32
                );
            }
            total += (bytes + DIR_ENTRY * live as usize) as u64;
        }
        assert_eq!(total, self.live_bytes);
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::page::DataMemory;

    #[test]
    fn entries_round_trip_and_space_is_reused() {
        let pool = DataMemory::new(8 * PAGE_SIZE as u64).unwrap();
        let pages = PageSource::new(pool.clone(), Default::default());
        let mut var = VarPart::new();
        let refs: Vec<VarRef> = (0..60u8)
            .map(|i| var.insert(&pages, &[i; 1000]).unwrap())
            .collect();
        assert_eq!(var.pages_held(), 2, "32 entries of 1000 bytes fit a page");
        for (i, &r) in refs.iter().enumerate() {
            assert_eq!(var.get(r), &[i as u8; 1000][..]);
        }
        // Free every other entry of the first page: holes, not a new page.
        for &r in refs.iter().step_by(2).take(10) {
            var.free(r);
        }
        let big = var.insert(&pages, &[0xAB; 5000]).unwrap();
        assert_eq!(var.pages_held(), 2, "compaction made room for 5000 bytes");
        assert_eq!(var.get(big), &[0xAB; 5000][..]);
        for (i, &r) in refs.iter().enumerate().skip(1).step_by(2) {
            assert_eq!(
                var.get(r),
                &[i as u8; 1000][..],
                "entries survive compaction"
            );
        }
        assert_eq!(var.audit(), var.live_bytes());
    }

    #[test]
    fn replace_grows_in_place_or_moves() {
        let pool = DataMemory::new(4 * PAGE_SIZE as u64).unwrap();
        let pages = PageSource::new(pool.clone(), Default::default());
        let mut var = VarPart::new();
        let a = var.insert(&pages, &[1; 100]).unwrap();
        let a2 = var.replace(&pages, a, &[2; 50]).unwrap();
        assert_eq!((a2, var.get(a2)), (a, &[2; 50][..]));
        let a3 = var.replace(&pages, a2, &[3; 2000]).unwrap();
        assert_eq!((a3, var.get(a3)), (a, &[3; 2000][..]));
        let filler = var.insert(&pages, &[4; PAGE_SIZE - 2000 - 100]).unwrap();
        let a4 = var.replace(&pages, a3, &[5; 3000]).unwrap();
        assert_ne!(a4, a3, "no room left: moved to another page");
        assert_eq!(var.get(a4), &[5; 3000][..]);
        assert_eq!(var.get(filler).len(), PAGE_SIZE - 2100);
        assert_eq!(var.audit(), var.live_bytes());
        var.free(a4);
        var.free(filler);
        assert_eq!(pool.used_pages(), 0);
        assert_eq!(var.live_bytes(), 0);
    }

    #[test]
    fn a_growing_entry_moves_rather_than_compact_a_page_for_a_few_bytes() {
        let pool = DataMemory::new(2 * PAGE_SIZE as u64).unwrap();
        let pages = PageSource::new(pool.clone(), Default::default());
        let mut var = VarPart::new();
        // A page full of 12-byte entries (16 with their directory entries).
        let refs: Vec<VarRef> = (0..PAGE_SIZE / 16)
            .map(|n| var.insert(&pages, &[n as u8; 12]).unwrap())
            .collect();
        assert_eq!(pool.used_pages(), 1);
        var.free(refs[0]);
        // 12 bytes of holes: growing an entry by one byte would compact
        // the whole page; it moves to another one instead.
        let grown = var.replace(&pages, refs[1], &[1; 13]).unwrap();
        assert_ne!(split(grown).0, split(refs[1]).0, "moved to another page");
        assert_eq!(var.get(grown), &[1; 13][..]);
        assert_eq!(pool.used_pages(), 2);
        // With no page left to take, the page is compacted after all.
        let filler = var
            .insert(&pages, &[9; PAGE_SIZE - 13 - 3 * DIR_ENTRY])
            .unwrap();
        let again = var.replace(&pages, refs[2], &[2; 14]).unwrap();
        assert_eq!(again, refs[2], "grown in its own page");
        assert_eq!(var.get(again), &[2; 14][..]);
        for &r in &refs[3..] {
            assert_eq!(var.get(r), &[split(r).1 as u8; 12][..]);
        }
        assert_eq!(var.audit(), var.live_bytes());
        var.free(filler);
    }

    #[test]
    fn a_full_pool_refuses_without_change() {
        let pool = DataMemory::new(PAGE_SIZE as u64).unwrap();
        let pages = PageSource::new(pool.clone(), Default::default());
        let mut var = VarPart::new();
        let a = var.insert(&pages, &[1; 20000]).unwrap();
        let b = var.insert(&pages, &[2; 10000]).unwrap();
        assert!(matches!(
            var.insert(&pages, &[3; 5000]),
            Err(StorageError::OutOfDataMemory(_))
        ));
        assert!(matches!(
            var.replace(&pages, a, &[4; 25000]),
            Err(StorageError::OutOfDataMemory(_))
        ));
        assert_eq!(var.get(a), &[1; 20000][..]);
        assert_eq!(var.get(b), &[2; 10000][..]);
        assert_eq!(var.audit(), 30008);
    }

    #[test]
    fn a_new_directory_entry_never_runs_into_the_entries() {
        let pool = DataMemory::new(4 * PAGE_SIZE as u64).unwrap();
        let pages = PageSource::new(pool.clone(), Default::default());
        let mut var = VarPart::new();
        // Fill the page to within 2 bytes of its directory, then shrink the
        // first entry: lots of room in holes, none in the gap, and no free
        // directory entry, so a new entry needs a new one.
        let first = var.insert(&pages, &[1; 3000]).unwrap();
        let rest = PAGE_SIZE - 3000 - 2 * DIR_ENTRY - 2;
        let second = var.insert(&pages, &vec![2; rest]).unwrap();
        let first = var.replace(&pages, first, &[5; 100]).unwrap();
        let third = var.insert(&pages, &[3; 500]).unwrap();
        assert_eq!(var.pages_held(), 1, "the hole was reused");
        assert_eq!(var.get(first), &[5; 100][..]);
        assert_eq!(var.get(second), &vec![2; rest][..]);
        assert_eq!(var.get(third), &[3; 500][..]);
        assert_eq!(var.audit(), var.live_bytes());
    }

    #[test]
    fn holes_wait_to_be_worth_a_compaction() {
        let pool = DataMemory::new(4 * PAGE_SIZE as u64).unwrap();
        let pages = PageSource::new(pool.clone(), Default::default());
        let mut var = VarPart::new();
        let refs: Vec<VarRef> = (0..32)
            .map(|_| var.insert(&pages, &[7; 1020]).unwrap())
            .collect();
        assert_eq!(var.pages_held(), 1, "the page is full");
        var.free(refs[0]);
        var.insert(&pages, &[8; 1000]).unwrap();
        assert_eq!(
            var.pages_held(),
            2,
            "one entry's hole is not worth compacting for"
        );
        var.free(refs[2]);
        var.free(refs[4]);
        let third = var.insert(&pages, &[9; 1000]).unwrap();
        assert_eq!(
            third >> DIR_BITS,
            0,
            "three holes are: the first page took it"
        );
        assert_eq!(var.audit(), var.live_bytes());
    }

    #[test]
    fn tiny_entries_stop_at_the_directory_limit() {
        let pool = DataMemory::new(4 * PAGE_SIZE as u64).unwrap();
        let pages = PageSource::new(pool.clone(), Default::default());
        let mut var = VarPart::new();
        for _ in 0..MAX_DIR + 1 {
            var.insert(&pages, &[0; 2]).unwrap();
        }
        assert_eq!(var.pages_held(), 2);
        assert_eq!(var.audit(), (MAX_DIR as u64 + 1) * 6);
    }
}
