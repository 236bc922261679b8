//! DataMemory: the one pool of 32 KiB pages that every row, variable-size part
//! and index entry of a data node lives in.
//!
//! The pool is a single anonymous mapping reserved at start; the kernel backs
//! a page with memory the first time it is written. A [`Page`] is the unique
//! handle to one page: whoever holds it may read and write those 32 KiB and
//! nobody else can, so a page belongs to exactly one fragment without locks.
//! Dropping the handle zeroes the page and gives it back to the pool.
//!
//! Every page is charged to a [`MemoryAccount`] — its database's — from the
//! moment it is taken until it is given back, so a database's memory is known
//! exactly at any moment without asking the workers.

use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use memmap2::MmapMut;

/// Bytes in a DataMemory page.
pub(crate) const PAGE_SIZE: usize = 32 * 1024;

/// Why no page could be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NoPage {
    #[error(transparent)]
    OutOfDataMemory(#[from] OutOfDataMemory),
    /// The account (or its parent) would pass its limit.
    #[error("a memory quota is reached")]
    QuotaReached,
}

/// The pool has no free page: the data node's DataMemory is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("out of DataMemory: all {total_pages} pages of {PAGE_SIZE} bytes are in use")]
pub(crate) struct OutOfDataMemory {
    pub total_pages: u32,
}

/// The pool of pages. Shared by every LDM worker; taking and returning a page
/// is the only moment workers touch shared state, once per 32 KiB of data.
pub struct DataMemory {
    /// Keeps the mapping alive; only ever reached through `base`.
    _map: MmapMut,
    base: NonNull<u8>,
    total_pages: u32,
    free: Mutex<FreePages>,
    used_pages: AtomicU32,
}

struct FreePages {
    /// Pages given back, reused first because they are already backed.
    returned: Vec<u32>,
    /// Pages never handed out yet are `next_fresh..total_pages`.
    next_fresh: u32,
}

// SAFETY: `base` points into `_map`, which lives as long as the pool; the pool
// itself never reads or writes page contents, only `Page` handles do, and each
// page has at most one handle.
unsafe impl Send for DataMemory {}
// SAFETY: as above; the shared state (`free`, `used_pages`) is synchronised.
unsafe impl Sync for DataMemory {}

impl DataMemory {
    /// Reserves `bytes` of DataMemory, rounded down to whole pages.
    pub fn new(bytes: u64) -> std::io::Result<Arc<Self>> {
        let total_pages = u32::try_from(bytes / PAGE_SIZE as u64).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "DataMemory is too large")
        })?;
        if total_pages == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("DataMemory must hold at least one page of {PAGE_SIZE} bytes"),
            ));
        }
        let mut map = MmapMut::map_anon(total_pages as usize * PAGE_SIZE)?;
        // Rows and index entries are reached at random: with 4 KiB pages
        // nearly every lookup also missed the TLB (a page walk before each
        // cache miss, prefetches included). Transparent 2 MiB pages, where
        // the kernel has them; pages are handed out from the start of the
        // mapping, so only what is used is backed, 2 MiB at a time.
        #[cfg(target_os = "linux")]
        if let Err(e) = map.advise(memmap2::Advice::HugePage) {
            tracing::debug!(error = %e, "DataMemory without transparent huge pages");
        }
        let base = NonNull::new(map.as_mut_ptr()).expect("mmap never returns null");
        Ok(Arc::new(DataMemory {
            _map: map,
            base,
            total_pages,
            free: Mutex::new(FreePages {
                returned: Vec::new(),
                next_fresh: 0,
            }),
            used_pages: AtomicU32::new(0),
        }))
    }

    /// Takes a zeroed page from the pool, charged to `account`.
    pub(crate) fn alloc(self: &Arc<Self>, account: &Arc<MemoryAccount>) -> Result<Page, NoPage> {
        account.charge()?;
        let id = self.take_page().inspect_err(|_| account.refund())?;
        self.used_pages.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `id < total_pages`, so the page lies inside the mapping.
        let ptr = unsafe { self.base.add(id as usize * PAGE_SIZE) }.cast();
        Ok(Page {
            ptr,
            id,
            pool: Arc::clone(self),
            account: Arc::clone(account),
        })
    }

    fn take_page(&self) -> Result<u32, OutOfDataMemory> {
        let id = {
            let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
            match free.returned.pop() {
                Some(id) => id,
                None if free.next_fresh < self.total_pages => {
                    free.next_fresh += 1;
                    free.next_fresh - 1
                }
                None => {
                    return Err(OutOfDataMemory {
                        total_pages: self.total_pages,
                    });
                }
            }
        };
        Ok(id)
    }

    fn release(&self, id: u32) {
        self.free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .returned
            .push(id);
        self.used_pages.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn total_pages(&self) -> u32 {
        self.total_pages
    }

    pub fn used_pages(&self) -> u32 {
        self.used_pages.load(Ordering::Relaxed)
    }

    pub fn total_bytes(&self) -> u64 {
        u64::from(self.total_pages) * PAGE_SIZE as u64
    }

    pub fn used_bytes(&self) -> u64 {
        u64::from(self.used_pages()) * PAGE_SIZE as u64
    }
}

impl fmt::Debug for DataMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DataMemory")
            .field("total_pages", &self.total_pages)
            .field("used_pages", &self.used_pages())
            .finish()
    }
}

/// DataMemory held by one owner — a database, or a tenant over its
/// databases — in bytes, with an optional limit that no page may pass.
#[derive(Debug)]
pub(crate) struct MemoryAccount {
    bytes: AtomicU64,
    /// `u64::MAX` when there is no limit.
    limit: AtomicU64,
    /// An account charged and limited together with this one.
    parent: Option<Arc<MemoryAccount>>,
}

impl Default for MemoryAccount {
    fn default() -> Self {
        MemoryAccount::new(None)
    }
}

impl MemoryAccount {
    pub(crate) fn new(parent: Option<Arc<MemoryAccount>>) -> MemoryAccount {
        MemoryAccount {
            bytes: AtomicU64::new(0),
            limit: AtomicU64::new(u64::MAX),
            parent,
        }
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    pub(crate) fn limit(&self) -> Option<u64> {
        Some(self.limit.load(Ordering::Relaxed)).filter(|&l| l != u64::MAX)
    }

    pub(crate) fn set_limit(&self, limit: Option<u64>) {
        self.limit
            .store(limit.unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Charges one page, unless that would pass this account's limit or its
    /// parent's.
    fn charge(&self) -> Result<(), NoPage> {
        let page = PAGE_SIZE as u64;
        let limit = self.limit.load(Ordering::Relaxed);
        self.bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                (b + page <= limit).then_some(b + page)
            })
            .map_err(|_| NoPage::QuotaReached)?;
        let charged_parent = self
            .parent
            .as_ref()
            .map_or(Ok(()), |parent| parent.charge());
        if charged_parent.is_err() {
            self.bytes.fetch_sub(page, Ordering::Relaxed);
        }
        charged_parent
    }

    fn refund(&self) {
        self.bytes.fetch_sub(PAGE_SIZE as u64, Ordering::Relaxed);
        if let Some(parent) = &self.parent {
            parent.refund();
        }
    }
}

/// Where a fragment takes its pages from, and whom they are charged to.
#[derive(Debug, Clone)]
pub(crate) struct PageSource {
    pool: Arc<DataMemory>,
    account: Arc<MemoryAccount>,
}

impl PageSource {
    pub(crate) fn new(pool: Arc<DataMemory>, account: Arc<MemoryAccount>) -> Self {
        PageSource { pool, account }
    }

    pub(crate) fn alloc(&self) -> Result<Page, NoPage> {
        self.pool.alloc(&self.account)
    }
}

/// The one handle to one page of DataMemory.
pub(crate) struct Page {
    ptr: NonNull<[u8; PAGE_SIZE]>,
    id: u32,
    /// Keeps the mapping alive for as long as the page is held.
    pool: Arc<DataMemory>,
    account: Arc<MemoryAccount>,
}

// SAFETY: a `Page` is the only way to reach its bytes, so moving it to another
// thread moves the exclusive access with it.
unsafe impl Send for Page {}

// SAFETY: `&Page` gives only shared access to the bytes (`bytes`, `words`);
// writing needs `&mut Page`, which no shared reference can coexist with.
unsafe impl Sync for Page {}

impl Page {
    pub(crate) fn bytes(&self) -> &[u8; PAGE_SIZE] {
        // SAFETY: the page is inside the live mapping (held by `pool`) and this
        // handle is its only owner; `&self` forbids a concurrent `&mut`.
        unsafe { self.ptr.as_ref() }
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8; PAGE_SIZE] {
        // SAFETY: as in `bytes`, and `&mut self` makes this access exclusive.
        unsafe { self.ptr.as_mut() }
    }
}

impl Page {
    /// The page as 64-bit words; pages are 4 KiB-aligned, so this is sound.
    pub(crate) fn words(&self) -> &[u64; PAGE_SIZE / 8] {
        // SAFETY: as in `bytes`; the mapping is page-aligned and every page
        // starts a multiple of PAGE_SIZE into it, so the cast is aligned, and
        // every bit pattern is a valid u64.
        unsafe { self.ptr.cast().as_ref() }
    }

    pub(crate) fn words_mut(&mut self) -> &mut [u64; PAGE_SIZE / 8] {
        // SAFETY: as in `words`, and `&mut self` makes the access exclusive.
        unsafe { self.ptr.cast().as_mut() }
    }
}

/// Asks the CPU to bring the cache line holding `value` into cache; a hint
/// that never faults and changes nothing.
#[inline(always)]
pub(crate) fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only hints the cache; it reads nothing and cannot fault.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (value as *const T).cast(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

impl Drop for Page {
    fn drop(&mut self) {
        // A page may next belong to another tenant's table: leave nothing behind.
        self.bytes_mut().fill(0);
        self.account.refund();
        self.pool.release(self.id);
    }
}

impl fmt::Debug for Page {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Page({})", self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_come_zeroed_and_go_back_on_drop() {
        let pool = DataMemory::new(3 * PAGE_SIZE as u64 + 100).unwrap();
        let one = Arc::new(MemoryAccount::default());
        let two = Arc::new(MemoryAccount::default());
        let first = PageSource::new(pool.clone(), one.clone());
        let second = PageSource::new(pool.clone(), two.clone());
        assert_eq!(pool.total_pages(), 3);
        let mut a = first.alloc().unwrap();
        a.bytes_mut()[..4].copy_from_slice(b"data");
        let b = first.alloc().unwrap();
        let c = second.alloc().unwrap();
        assert_eq!(pool.used_pages(), 3);
        assert_eq!(one.bytes(), 2 * PAGE_SIZE as u64);
        assert_eq!(two.bytes(), PAGE_SIZE as u64);
        assert_eq!(
            second.alloc().unwrap_err(),
            NoPage::OutOfDataMemory(OutOfDataMemory { total_pages: 3 })
        );
        assert_eq!(
            two.bytes(),
            PAGE_SIZE as u64,
            "a page not had is not charged"
        );
        drop(a);
        assert_eq!(pool.used_pages(), 2);
        assert_eq!(one.bytes(), PAGE_SIZE as u64);
        let again = second.alloc().unwrap();
        assert!(
            again.bytes().iter().all(|&b| b == 0),
            "a reused page is zeroed"
        );
        drop((b, c, again));
        assert_eq!(pool.used_pages(), 0);
        assert_eq!((one.bytes(), two.bytes()), (0, 0));
    }

    #[test]
    fn accounts_stop_at_their_limit_and_their_parent_s() {
        let pool = DataMemory::new(10 * PAGE_SIZE as u64).unwrap();
        let tenant = Arc::new(MemoryAccount::default());
        let a = Arc::new(MemoryAccount::new(Some(tenant.clone())));
        let b = Arc::new(MemoryAccount::new(Some(tenant.clone())));
        a.set_limit(Some(2 * PAGE_SIZE as u64 + 100));
        tenant.set_limit(Some(3 * PAGE_SIZE as u64));
        let (pa, pb) = (
            PageSource::new(pool.clone(), a.clone()),
            PageSource::new(pool.clone(), b.clone()),
        );
        let held = [pa.alloc().unwrap(), pa.alloc().unwrap()];
        assert_eq!(
            pa.alloc().unwrap_err(),
            NoPage::QuotaReached,
            "a's own limit"
        );
        let third = pb.alloc().unwrap();
        assert_eq!(
            pb.alloc().unwrap_err(),
            NoPage::QuotaReached,
            "the tenant's limit"
        );
        assert_eq!(
            (a.bytes(), b.bytes(), tenant.bytes()),
            (2 * PAGE_SIZE as u64, PAGE_SIZE as u64, 3 * PAGE_SIZE as u64)
        );
        assert_eq!(pool.used_pages(), 3, "refused pages never left the pool");
        drop(held);
        assert_eq!(tenant.bytes(), PAGE_SIZE as u64);
        a.set_limit(None);
        drop(third);
        assert_eq!((a.bytes(), b.bytes(), tenant.bytes()), (0, 0, 0));
    }

    #[test]
    fn an_empty_pool_is_refused() {
        assert!(DataMemory::new(PAGE_SIZE as u64 - 1).is_err());
    }
}
