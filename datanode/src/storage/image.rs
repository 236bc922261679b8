//! Fragment images: a fragment's pages and bookkeeping, byte for byte, as a
//! checkpoint stores them. Restoring an image gives back the fragment
//! exactly — the same pages, the same free space, the same memory figures.
//!
//! ```text
//! [magic "SHOALFRG"][version u32][slot size u32][var columns u32]
//! [fixed part][var part][hash index][crc32c u32 of everything before it]
//! ```
//! Each part writes its page table (a page's bookkeeping and its 32 KiB, or
//! a hole) and its lists; all integers little-endian.

use super::page::{PAGE_SIZE, Page, PageSource};

const MAGIC: &[u8; 8] = b"SHOALFRG";
const VERSION: u32 = 1;

/// Appends an image.
pub(crate) struct ImageWriter<'a>(pub(crate) &'a mut Vec<u8>);

impl ImageWriter<'_> {
    pub(crate) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }

    pub(crate) fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    pub(crate) fn page(&mut self, page: &[u8; PAGE_SIZE]) {
        self.0.extend_from_slice(page);
    }

    pub(crate) fn list(&mut self, list: &[u32]) {
        self.u32(list.len() as u32);
        list.iter().for_each(|&v| self.u32(v));
    }

    /// Writes a page table: its length, then each entry as a hole or as the
    /// page's bookkeeping followed by its bytes.
    pub(crate) fn pages<P: ImagePage>(&mut self, pages: &[Option<P>]) {
        self.u32(pages.len() as u32);
        for p in pages {
            match p {
                None => self.u8(0),
                Some(p) => {
                    self.u8(1);
                    p.write_head(self);
                    self.page(p.page().bytes());
                }
            }
        }
    }
}

/// A page of a part, as its page table is kept in an image.
pub(crate) trait ImagePage: Sized {
    fn page(&self) -> &Page;
    fn page_mut(&mut self) -> &mut Page;
    /// Writes the page's bookkeeping.
    fn write_head(&self, w: &mut ImageWriter<'_>);
    /// Reads back what `write_head` wrote, checking it, for `page` (whose
    /// bytes are filled in after).
    fn read_head(r: &mut ImageReader<'_>, page: Page) -> Result<Self, ImageError>;
}

/// Reads an image, refusing one that ends early.
pub(crate) struct ImageReader<'a>(&'a [u8]);

/// Why an image could not be read back.
pub(crate) type ImageError = String;

impl<'a> ImageReader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ImageError> {
        if self.0.len() < n {
            return Err("the image ends early".into());
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, ImageError> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u16(&mut self) -> Result<u16, ImageError> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("2")))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, ImageError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, ImageError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }

    pub(crate) fn page(&mut self) -> Result<&'a [u8; PAGE_SIZE], ImageError> {
        Ok(self.take(PAGE_SIZE)?.try_into().expect("a page"))
    }

    /// A list of at most `max` entries, each below `bound`.
    pub(crate) fn list(&mut self, max: usize, bound: u32) -> Result<Vec<u32>, ImageError> {
        let len = self.u32()? as usize;
        if len > max {
            return Err(format!("a list of {len} entries, more than {max}"));
        }
        (0..len)
            .map(|_| {
                let v = self.u32()?;
                if v >= bound {
                    Err(format!("an entry {v} out of range"))
                } else {
                    Ok(v)
                }
            })
            .collect()
    }

    /// Reads a page table of at most `max` pages back into new pages from
    /// `source`.
    pub(crate) fn pages<P: ImagePage>(
        &mut self,
        max: usize,
        source: &PageSource,
    ) -> Result<Vec<Option<P>>, ImageError> {
        let len = self.u32()? as usize;
        if len > max {
            return Err(format!("{len} pages, more than a part holds"));
        }
        let mut pages = Vec::with_capacity(len);
        for _ in 0..len {
            pages.push(match self.u8()? {
                0 => None,
                1 => {
                    let page = source.alloc().map_err(|e| e.to_string())?;
                    let mut p = P::read_head(self, page)?;
                    p.page_mut().bytes_mut().copy_from_slice(self.page()?);
                    Some(p)
                }
                other => return Err(format!("a page table entry marked {other}")),
            });
        }
        Ok(pages)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Starts an image of a fragment with this row layout.
pub(crate) fn begin(out: &mut Vec<u8>, slot_size: usize, n_var: usize) {
    out.extend_from_slice(MAGIC);
    let mut w = ImageWriter(out);
    w.u32(VERSION);
    w.u32(slot_size as u32);
    w.u32(n_var as u32);
}

/// Ends an image begun at `start` of `out` with its checksum.
pub(crate) fn finish(out: &mut Vec<u8>, start: usize) {
    let crc = crc32c::crc32c(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// Checks an image's checksum and header against the layout it must have,
/// and returns a reader of its parts.
pub(crate) fn open(
    bytes: &[u8],
    slot_size: usize,
    n_var: usize,
) -> Result<ImageReader<'_>, ImageError> {
    if bytes.len() < MAGIC.len() + 16 {
        return Err("too short to be a fragment image".into());
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    if crc32c::crc32c(body) != u32::from_le_bytes(crc.try_into().expect("4")) {
        return Err("its checksum does not match".into());
    }
    if &body[..MAGIC.len()] != MAGIC {
        return Err("not a fragment image".into());
    }
    let mut r = ImageReader(&body[MAGIC.len()..]);
    let version = r.u32()?;
    if version != VERSION {
        return Err(format!(
            "image version {version}, this node reads {VERSION}"
        ));
    }
    let (slot, vars) = (r.u32()?, r.u32()?);
    if (slot as usize, vars as usize) != (slot_size, n_var) {
        return Err(format!(
            "made for rows of {slot} bytes and {vars} var columns, the table has {slot_size} and {n_var}"
        ));
    }
    Ok(r)
}
