//! Fixed-part pages: each page is cut into slots of the table's fixed row
//! size; free slots form a chain through their headers.
//!
//! A row is named by a [`RowRef`]: the page's position in this fragment
//! (upper 20 bits) and the slot in the page (lower 12 bits). Rows never move,
//! so a reference stays valid until the row is deleted.

use super::StorageError;
use super::image::{ImageError, ImagePage, ImageReader, ImageWriter};
use super::layout::{LIVE, MIN_SLOT, ROW_HEADER};
use super::page::{PAGE_SIZE, Page, PageSource};

/// A row's place in its fragment: page position << 12 | slot.
pub(crate) type RowRef = u32;

pub(crate) const SLOT_BITS: u32 = 12;
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;
/// Most pages a fragment's fixed part can hold: 2^20 pages, 32 GiB.
pub(crate) const MAX_PAGES: usize = 1 << (32 - SLOT_BITS);
/// Ends a chain of free slots.
const NO_SLOT: u32 = !LIVE;
const _: () = assert!(PAGE_SIZE / MIN_SLOT <= 1 << SLOT_BITS);
/// A position in a list this page is not in.
const NOT_LISTED: u32 = u32::MAX;

struct FixedPage {
    page: Page,
    /// First slot of the chain of freed slots, or `NO_SLOT`.
    free_head: u32,
    /// Slots from here on have never been used.
    unused_from: u32,
    live: u32,
    /// Position in `FixedPart::with_free`, or `NOT_LISTED` when full.
    free_pos: u32,
}

impl ImagePage for FixedPage {
    fn page(&self) -> &Page {
        &self.page
    }

    fn page_mut(&mut self) -> &mut Page {
        &mut self.page
    }

    fn write_head(&self, w: &mut ImageWriter<'_>) {
        w.u32(self.free_head);
        w.u32(self.unused_from);
        w.u32(self.live);
        w.u32(self.free_pos);
    }

    fn read_head(r: &mut ImageReader<'_>, page: Page) -> Result<FixedPage, ImageError> {
        Ok(FixedPage {
            page,
            free_head: r.u32()?,
            unused_from: r.u32()?,
            live: r.u32()?,
            free_pos: r.u32()?,
        })
    }
}

pub(crate) struct FixedPart {
    slot_size: usize,
    slots_per_page: u32,
    /// Pages by position; `None` where a page was given back.
    pages: Vec<Option<FixedPage>>,
    /// Positions in `pages` that are `None`.
    holes: Vec<u32>,
    /// Positions of pages with at least one free slot.
    with_free: Vec<u32>,
    live: u64,
}

#[inline]
fn split(r: RowRef) -> (usize, usize) {
    ((r >> SLOT_BITS) as usize, (r & SLOT_MASK) as usize)
}

fn header(slot: &[u8]) -> u32 {
    u32::from_le_bytes(slot[..ROW_HEADER].try_into().expect("header"))
}

impl FixedPart {
    pub(crate) fn new(slot_size: usize) -> FixedPart {
        debug_assert!(slot_size >= MIN_SLOT);
        FixedPart {
            slot_size,
            slots_per_page: (PAGE_SIZE / slot_size) as u32,
            pages: Vec::new(),
            holes: Vec::new(),
            with_free: Vec::new(),
            live: 0,
        }
    }

    pub(crate) fn slot_size(&self) -> usize {
        self.slot_size
    }

    pub(crate) fn live_rows(&self) -> u64 {
        self.live
    }

    pub(crate) fn pages_held(&self) -> usize {
        self.pages.len() - self.holes.len()
    }

    /// Takes a free slot, adding a page when none has one. The slot's
    /// contents are the caller's to write; its header must get `LIVE`.
    pub(crate) fn alloc(&mut self, pages: &PageSource) -> Result<RowRef, StorageError> {
        let pos = match self.with_free.last() {
            Some(&pos) => pos as usize,
            None => self.add_page(pages)?,
        };
        let p = self.pages[pos].as_mut().expect("listed page is held");
        let slot = if p.free_head != NO_SLOT {
            let slot = p.free_head;
            let start = slot as usize * self.slot_size;
            p.free_head = header(&p.page.bytes()[start..]);
            slot
        } else {
            p.unused_from += 1;
            p.unused_from - 1
        };
        p.live += 1;
        self.live += 1;
        if p.free_head == NO_SLOT && p.unused_from == self.slots_per_page {
            self.unlist(pos);
        }
        Ok((pos as u32) << SLOT_BITS | slot)
    }

    fn add_page(&mut self, pages: &PageSource) -> Result<usize, StorageError> {
        if self.holes.is_empty() && self.pages.len() >= MAX_PAGES {
            return Err(StorageError::FragmentFull);
        }
        let page = pages.alloc()?;
        let fp = FixedPage {
            page,
            free_head: NO_SLOT,
            unused_from: 0,
            live: 0,
            free_pos: self.with_free.len() as u32,
        };
        let pos = match self.holes.pop() {
            Some(pos) => {
                self.pages[pos as usize] = Some(fp);
                pos as usize
            }
            None => {
                self.pages.push(Some(fp));
                self.pages.len() - 1
            }
        };
        self.with_free.push(pos as u32);
        Ok(pos)
    }

    fn unlist(&mut self, pos: usize) {
        let p = self.pages[pos].as_mut().expect("held");
        let at = p.free_pos as usize;
        p.free_pos = NOT_LISTED;
        self.with_free.swap_remove(at);
        if let Some(&moved) = self.with_free.get(at) {
            self.pages[moved as usize].as_mut().expect("held").free_pos = at as u32;
        }
    }

    /// Frees a slot; a page left without rows goes back to the pool.
    pub(crate) fn free(&mut self, r: RowRef) {
        let (pos, slot) = split(r);
        let slot_size = self.slot_size;
        let p = self.pages[pos].as_mut().expect("row's page is held");
        let was_full = p.free_pos == NOT_LISTED;
        let start = slot * slot_size;
        p.page.bytes_mut()[start..start + ROW_HEADER].copy_from_slice(&p.free_head.to_le_bytes());
        p.free_head = slot as u32;
        p.live -= 1;
        self.live -= 1;
        let empty = p.live == 0;
        if was_full {
            p.free_pos = self.with_free.len() as u32;
            self.with_free.push(pos as u32);
        }
        if empty {
            self.unlist(pos);
            self.pages[pos] = None;
            self.holes.push(pos as u32);
        }
    }

    #[inline]
    pub(crate) fn slot(&self, r: RowRef) -> &[u8] {
        let (pos, slot) = split(r);
        let page = &self.pages[pos].as_ref().expect("row's page is held").page;
        &page.bytes()[slot * self.slot_size..][..self.slot_size]
    }

    #[inline]
    pub(crate) fn slot_mut(&mut self, r: RowRef) -> &mut [u8] {
        let (pos, slot) = split(r);
        let size = self.slot_size;
        let page = &mut self.pages[pos].as_mut().expect("row's page is held").page;
        &mut page.bytes_mut()[slot * size..][..size]
    }

    #[inline]
    pub(crate) fn prefetch(&self, r: RowRef) {
        let (pos, slot) = split(r);
        if let Some(Some(p)) = self.pages.get(pos) {
            super::page::prefetch(&p.page.bytes()[slot * self.slot_size]);
        }
    }

    /// The first live row at or after position `from`, in page order.
    pub(crate) fn next_live(&self, from: RowRef) -> Option<RowRef> {
        let (mut pos, mut slot) = split(from);
        while pos < self.pages.len() {
            if let Some(p) = &self.pages[pos] {
                while (slot as u32) < p.unused_from {
                    let start = slot * self.slot_size;
                    if header(&p.page.bytes()[start..]) & LIVE != 0 {
                        return Some((pos as u32) << SLOT_BITS | slot as u32);
                    }
                    slot += 1;
                }
            }
            pos += 1;
            slot = 0;
        }
        None
    }

    /// Writes the part's pages and bookkeeping into a fragment image.
    pub(crate) fn write_image(&self, w: &mut ImageWriter<'_>) {
        w.pages(&self.pages);
        w.list(&self.holes);
        w.list(&self.with_free);
        w.u64(self.live);
    }

    /// Reads a part back from a fragment image, in new pages from `pages`.
    pub(crate) fn read_image(
        slot_size: usize,
        r: &mut ImageReader<'_>,
        pages: &PageSource,
    ) -> Result<FixedPart, ImageError> {
        let mut part = FixedPart::new(slot_size);
        part.pages = r.pages(MAX_PAGES, pages)?;
        let len = part.pages.len();
        part.holes = r.list(len, len as u32)?;
        part.with_free = r.list(len, len as u32)?;
        part.live = r.u64()?;
        Ok(part)
    }

    /// Recounts live slots page by page, checking each page's own count;
    /// returns the total. For tests of the accounting.
    pub(crate) fn audit(&self) -> u64 {
        let mut total = 0;
        for p in self.pages.iter().flatten() {
            let live = (0..p.unused_from as usize)
                .filter(|s| header(&p.page.bytes()[s * self.slot_size..]) & LIVE != 0)
                .count() as u32;
            assert_eq!(live, p.live, "a fixed page's live count is off");
            assert!(live > 0, "an empty fixed page was kept");
            total += u64::from(live);
        }
        assert_eq!(total, self.live);
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::page::DataMemory;

    fn mark_live(part: &mut FixedPart, r: RowRef) {
        part.slot_mut(r)[..4].copy_from_slice(&LIVE.to_le_bytes());
    }

    #[test]
    fn slots_fill_pages_and_empty_pages_go_back() {
        let pool = DataMemory::new(4 * PAGE_SIZE as u64).unwrap();
        let pages = PageSource::new(pool.clone(), Default::default());
        let mut part = FixedPart::new(1024);
        let rows: Vec<RowRef> = (0..64)
            .map(|_| {
                let r = part.alloc(&pages).unwrap();
                mark_live(&mut part, r);
                r
            })
            .collect();
        assert_eq!(part.pages_held(), 2, "32 slots of 1 KiB a page");
        assert_eq!(pool.used_pages(), 2);
        assert_eq!(part.audit(), 64);
        for &r in &rows[..32] {
            part.free(r);
        }
        assert_eq!(part.pages_held(), 1);
        assert_eq!(pool.used_pages(), 1);
        // A freed slot is reused before a new page is taken.
        part.free(rows[40]);
        let again = part.alloc(&pages).unwrap();
        assert_eq!(again, rows[40]);
        mark_live(&mut part, again);
        assert_eq!(part.audit(), 32);
        assert_eq!(part.next_live(0), Some(rows[32]));
    }

    #[test]
    fn out_of_memory_leaves_the_part_unchanged() {
        let pool = DataMemory::new(PAGE_SIZE as u64).unwrap();
        let pages = PageSource::new(pool.clone(), Default::default());
        let mut part = FixedPart::new(PAGE_SIZE / 2);
        let a = part.alloc(&pages).unwrap();
        mark_live(&mut part, a);
        let b = part.alloc(&pages).unwrap();
        mark_live(&mut part, b);
        assert!(matches!(
            part.alloc(&pages),
            Err(StorageError::OutOfDataMemory(_))
        ));
        assert_eq!(part.audit(), 2);
        part.free(a);
        part.free(b);
        assert_eq!(pool.used_pages(), 0);
    }
}
