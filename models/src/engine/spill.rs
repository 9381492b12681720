//! The part of the visited set that lives on disk: one file of fingerprints in ascending order,
//! a sparse index into it in memory, and the directory that holds the file, made at the first
//! flush and removed when the set is dropped.
//!
//! A flush merges the memory table's fingerprints, given in ascending order, with the file into
//! a new file, which then replaces it (TLC's `DiskFPSet` does the same). One file rather than
//! several runs merged now and then: a lookup that misses in memory — every new state, and
//! every revisit of a state flushed before — then reads one page of one file, where k runs
//! would cost up to k reads, and lookups outnumber flushes by millions to one. The price is
//! that every flush rewrites the whole file: with memory for a k-th of the set, its k flushes
//! write about (k+1)/2 times the final file in all, sequentially.
//!
//! The index holds the first fingerprint of every page of [`PAGE`] fingerprints (4 KiB, one
//! page of the OS's cache): a lookup binary-searches the index, reads that one page with
//! `pread` and binary-searches it. The page cache usually holds the file, so the read is a
//! copy. The index takes 8 bytes per page, 1/512 of the file (16 MiB per billion fingerprints
//! on disk). The file is never synced: it is this process's scratch, read back only by it, and
//! `pread` reads what the page cache holds.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Fingerprints per page of the file: 4 KiB, the unit of one lookup's read.
pub const PAGE: usize = 512;

/// Bytes of each buffer a merge reads the old file and writes the new one through.
const BUFFER: usize = 1 << 20;

/// Why the visited set could not use the disk: what it was doing, on which path, and the
/// operating system's error.
#[derive(Debug)]
pub struct SpillError {
    doing: &'static str,
    path: PathBuf,
    source: io::Error,
}

impl fmt::Display for SpillError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the visited set could not spill to disk: {} {}: {}",
            self.doing,
            self.path.display(),
            self.source
        )
    }
}

impl std::error::Error for SpillError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// A function that wraps an I/O error on `path` while `doing` something.
fn failed<'a>(doing: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> SpillError + 'a {
    move |source| SpillError {
        doing,
        path: path.to_path_buf(),
        source,
    }
}

/// A directory made for one set's files, removed with the set.
struct Dir(PathBuf);

impl Dir {
    /// A new directory in `base`, named for this process and a counter: several searches may
    /// spill at once in one process, and several processes into one base.
    fn create(base: &Path) -> Result<Dir, SpillError> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("isr-visited-{}-{n}", std::process::id()));
            match fs::create_dir(&path) {
                Ok(()) => return Ok(Dir(path)),
                // Left by an earlier process with the same id: take the next name.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(failed("creating", &path)(e)),
            }
        }
    }
}

impl Drop for Dir {
    /// Best effort: the search is over and nothing it found depends on the files; a directory
    /// that cannot be removed is left, its name saying what it held.
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The fingerprints on disk.
pub struct Disk {
    /// Where the directory is made at the first flush.
    base: PathBuf,
    dir: Option<Dir>,
    /// The sorted file, once there is one, with its path.
    file: Option<(File, PathBuf)>,
    /// The first fingerprint of each page of the file.
    index: Vec<u64>,
    len: usize,
}

impl Disk {
    /// No fingerprint yet; the directory will be made in `base`.
    pub fn new(base: PathBuf) -> Disk {
        Disk {
            base,
            dir: None,
            file: None,
            index: Vec::new(),
            len: 0,
        }
    }

    /// The number of fingerprints on disk.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `fp` is on disk: one page read.
    pub fn contains(&self, fp: u64) -> Result<bool, SpillError> {
        let Some((file, path)) = &self.file else {
            return Ok(false);
        };
        let page = self.index.partition_point(|&first| first <= fp);
        if page == 0 {
            return Ok(false);
        }
        let start = (page - 1) * PAGE;
        let n = PAGE.min(self.len - start);
        let mut buf = [0u8; PAGE * 8];
        let bytes = &mut buf[..n * 8];
        file.read_exact_at(bytes, (start * 8) as u64)
            .map_err(failed("reading", path))?;
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes[mid * 8..mid * 8 + 8]);
            match u64::from_le_bytes(word).cmp(&fp) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(true),
            }
        }
        Ok(false)
    }

    /// Merges `fresh`, in ascending order, into the file: their union is written to a new file,
    /// which then replaces the old one. On an error the fingerprints on disk are as they were
    /// (the disk must hold the old file and the new one at once).
    pub fn merge(&mut self, fresh: impl Iterator<Item = u64>) -> Result<(), SpillError> {
        let dir = match &self.dir {
            Some(dir) => dir.0.clone(),
            None => {
                let dir = Dir::create(&self.base)?;
                let path = dir.0.clone();
                self.dir = Some(dir);
                path
            }
        };
        let (next, current) = (dir.join("visited.next"), dir.join("visited"));
        let out = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&next)
            .map_err(failed("creating", &next))?;
        let old = match &self.file {
            Some((file, path)) => {
                Some(Sorted::new(file, self.len).map_err(failed("reading", path))?)
            }
            None => None,
        };
        let mut run = Run::new(&out);
        union(old, fresh, &mut run).map_err(|e| match e {
            Side::Old(e) => failed("reading", &current)(e),
            Side::New(e) => failed("writing", &next)(e),
        })?;
        let (index, len) = run.finish().map_err(failed("writing", &next))?;
        fs::rename(&next, &current).map_err(failed("renaming", &next))?;
        self.file = Some((out, current));
        self.index = index;
        self.len = len;
        Ok(())
    }
}

/// Which file an error of a merge was on.
enum Side {
    Old(io::Error),
    New(io::Error),
}

/// Writes the union of the old file's fingerprints and `fresh`, both ascending, to `run`.
fn union(old: Option<Sorted>, fresh: impl Iterator<Item = u64>, run: &mut Run) -> Result<(), Side> {
    let mut old = old;
    let mut next_old = || match &mut old {
        Some(sorted) => sorted.next().map_err(Side::Old),
        None => Ok(None),
    };
    let mut pending = next_old()?;
    for fp in fresh {
        while let Some(o) = pending.filter(|&o| o <= fp) {
            // A fingerprint in both is written once.
            if o < fp {
                run.push(o).map_err(Side::New)?;
            }
            pending = next_old()?;
        }
        run.push(fp).map_err(Side::New)?;
    }
    while let Some(o) = pending {
        run.push(o).map_err(Side::New)?;
        pending = next_old()?;
    }
    Ok(())
}

/// The fingerprints of a file, read in order from its start.
struct Sorted<'a> {
    reader: BufReader<&'a File>,
    left: usize,
}

impl<'a> Sorted<'a> {
    fn new(mut file: &'a File, len: usize) -> io::Result<Sorted<'a>> {
        // The file was last written through this handle, which left its cursor at the end.
        file.seek(SeekFrom::Start(0))?;
        Ok(Sorted {
            reader: BufReader::with_capacity(BUFFER, file),
            left: len,
        })
    }

    fn next(&mut self) -> io::Result<Option<u64>> {
        if self.left == 0 {
            return Ok(None);
        }
        let mut word = [0u8; 8];
        self.reader.read_exact(&mut word)?;
        self.left -= 1;
        Ok(Some(u64::from_le_bytes(word)))
    }
}

/// A file being written in ascending order, with its index.
struct Run<'a> {
    writer: BufWriter<&'a File>,
    index: Vec<u64>,
    len: usize,
}

impl<'a> Run<'a> {
    fn new(file: &'a File) -> Run<'a> {
        Run {
            writer: BufWriter::with_capacity(BUFFER, file),
            index: Vec::new(),
            len: 0,
        }
    }

    fn push(&mut self, fp: u64) -> io::Result<()> {
        if self.len % PAGE == 0 {
            self.index.push(fp);
        }
        self.len += 1;
        self.writer.write_all(&fp.to_le_bytes())
    }

    /// Writes what is buffered; the index and the count.
    fn finish(mut self) -> io::Result<(Vec<u64>, usize)> {
        self.writer.flush()?;
        Ok((self.index, self.len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp() -> PathBuf {
        std::env::temp_dir()
    }

    #[test]
    fn merges_keep_every_fingerprint_findable_and_the_directory_goes_with_the_set() {
        let mut disk = Disk::new(temp());
        // Three merges of interleaved batches, more than a page each.
        for k in 0..3u64 {
            disk.merge((0..2000u64).map(|i| 1 + i * 6 + k * 2)).unwrap();
        }
        assert_eq!(disk.len(), 6000);
        for i in 0..2000u64 {
            for k in 0..3 {
                assert!(disk.contains(1 + i * 6 + k * 2).unwrap());
            }
            assert!(!disk.contains(2 + i * 6).unwrap());
        }
        assert!(!disk.contains(0).unwrap());
        assert!(!disk.contains(u64::MAX).unwrap());
        let dir = disk.dir.as_ref().unwrap().0.clone();
        assert!(dir.join("visited").exists());
        drop(disk);
        assert!(!dir.exists());
    }

    #[test]
    fn a_directory_that_cannot_be_made_is_an_error_not_a_panic() {
        let mut disk = Disk::new(PathBuf::from("/proc/no-such-place"));
        let e = disk.merge([1, 2, 3].into_iter()).unwrap_err();
        assert!(
            e.to_string().contains("creating /proc/no-such-place/"),
            "{e}"
        );
        assert!(disk.is_empty());
        assert!(!disk.contains(2).unwrap());
    }
}
