//! Vectored writes: many buffers, one `writev(2)`.
//!
//! An [`IoBatch`] collects up to [`MAX_IOV`] (256) slices in an iovec array
//! that lives on the stack (4 KiB), so building and flushing a batch never
//! allocates. The caller pushes the front of its output queue (the first
//! slice possibly offset by what an earlier partial write already sent),
//! calls [`IoBatch::write_to`], and consumes as many bytes as it reports.

use std::io;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::os::fd::RawFd;

/// Most buffers one `writev` takes (well under Linux's IOV_MAX of 1024).
pub const MAX_IOV: usize = 256;

/// `repr(C)` with the counters first: the optimiser merges the two zero
/// stores of `new()` with any adjacent uninitialised bytes into one memset,
/// so with the array next to the counters it cleared all 4 KiB on every
/// flush (seen as most of the instructions per request under callgrind).
#[repr(C)]
pub struct IoBatch<'a> {
    n: usize,
    bytes: usize,
    _borrow: PhantomData<&'a [u8]>,
    /// Only the first `n` entries are initialised.
    iov: MaybeUninit<[libc::iovec; MAX_IOV]>,
}

impl Default for IoBatch<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a> IoBatch<'a> {
    pub fn new() -> Self {
        IoBatch {
            iov: MaybeUninit::uninit(),
            n: 0,
            bytes: 0,
            _borrow: PhantomData,
        }
    }

    /// Add a slice. Empty slices are skipped, and one that starts where
    /// the last one ends extends it (slices cut one after another from one
    /// buffer, as a batch of replies often is, go as one iovec: the kernel
    /// copies one segment instead of many). Returns false (and adds
    /// nothing) when the batch is full.
    pub fn push(&mut self, buf: &'a [u8]) -> bool {
        if buf.is_empty() {
            return true;
        }
        if self.n > 0 {
            // SAFETY: entry n - 1 is initialised (n > 0, and n <= MAX_IOV).
            let last = unsafe { &mut *(self.iov.as_mut_ptr() as *mut libc::iovec).add(self.n - 1) };
            // Adjacent addresses: the one range covers both slices, which
            // are both borrowed for 'a, so every byte of it is readable
            // and the bytes are exactly the two slices, in order.
            if (last.iov_base as usize).wrapping_add(last.iov_len) == buf.as_ptr() as usize {
                last.iov_len += buf.len();
                self.bytes += buf.len();
                return true;
            }
        }
        if self.n == MAX_IOV {
            return false;
        }
        // SAFETY: n < MAX_IOV, so the write stays inside the array; the
        // pointee is borrowed for 'a, which outlives the batch.
        unsafe {
            (self.iov.as_mut_ptr() as *mut libc::iovec)
                .add(self.n)
                .write(libc::iovec {
                    iov_base: buf.as_ptr() as *mut libc::c_void,
                    iov_len: buf.len(),
                });
        }
        self.n += 1;
        self.bytes += buf.len();
        true
    }

    pub fn is_full(&self) -> bool {
        self.n == MAX_IOV
    }

    /// Number of slices.
    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Total bytes in the batch.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// One `writev`; returns the bytes the kernel took (maybe fewer than
    /// `bytes()`). `EINTR` is retried; `EAGAIN` comes back as `WouldBlock`.
    pub fn write_to(&self, fd: RawFd) -> io::Result<usize> {
        if self.n == 0 {
            return Ok(0);
        }
        loop {
            // SAFETY: the first `n` entries are initialised and point into
            // slices borrowed for 'a, which outlives `self`.
            // The raw system call: libc's writev is a thread-cancellation
            // point and wraps every call in cancellation bookkeeping that
            // this program never uses (a few hundred instructions per
            // request under callgrind, with read).
            let r = unsafe {
                libc::syscall(
                    libc::SYS_writev,
                    fd,
                    self.iov.as_ptr() as *const libc::iovec,
                    self.n as libc::c_int,
                )
            };
            if r >= 0 {
                return Ok(r as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// Read into the spare capacity of `dst` without zeroing it first; returns
/// the bytes read (0 at EOF). The caller guarantees spare capacity.
pub fn read_into(fd: RawFd, dst: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
    if dst.is_empty() {
        return Ok(0);
    }
    loop {
        // SAFETY: `dst` is valid for writes of its length; read(2) writes at
        // most that many bytes and we report exactly how many it wrote.
        let r = unsafe {
            libc::syscall(
                libc::SYS_read,
                fd,
                dst.as_mut_ptr() as *mut libc::c_void,
                dst.len(),
            )
        };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn batches_are_bounded_and_written_in_order() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let parts: Vec<Vec<u8>> = (0..300).map(|i| format!("<{i}>").into_bytes()).collect();
        let mut batch = IoBatch::new();
        let mut pushed = 0;
        for p in &parts {
            if !batch.push(p) {
                break;
            }
            pushed += 1;
        }
        assert_eq!(pushed, MAX_IOV);
        assert!(batch.is_full());
        assert!(batch.push(b""), "empty slices never fill a batch");
        let expect: Vec<u8> = parts[..MAX_IOV].concat();
        assert_eq!(batch.bytes(), expect.len());
        let n = batch.write_to(a.as_raw_fd()).unwrap();
        assert_eq!(n, expect.len());
        drop(a);
        let mut got = vec![];
        b.read_to_end(&mut got).unwrap();
        assert_eq!(got, expect);
    }

    #[test]
    fn adjacent_slices_go_as_one_iovec() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let buf: Vec<u8> = (0..=255u8).collect();
        let other = b"-apart-".to_vec();
        let mut batch = IoBatch::new();
        assert!(batch.push(&buf[..10]));
        assert!(batch.push(&buf[10..10]));
        assert!(batch.push(&buf[10..100]));
        assert!(batch.push(&buf[100..]));
        assert_eq!(batch.len(), 1, "three slices of one buffer, in order");
        assert!(batch.push(&other));
        assert!(batch.push(&buf[..5]), "not after `other`: a new entry");
        assert_eq!(batch.len(), 3);
        let mut expect = buf.clone();
        expect.extend_from_slice(&other);
        expect.extend_from_slice(&buf[..5]);
        assert_eq!(batch.bytes(), expect.len());
        assert_eq!(batch.write_to(a.as_raw_fd()).unwrap(), expect.len());
        drop(a);
        let mut got = vec![];
        b.read_to_end(&mut got).unwrap();
        assert_eq!(got, expect);
    }

    #[test]
    fn partial_writes_report_would_block() {
        let (a, _b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let big = vec![7u8; 1 << 20];
        let mut total = 0;
        let err = loop {
            let mut batch = IoBatch::new();
            batch.push(&big);
            match batch.write_to(a.as_raw_fd()) {
                Ok(n) => {
                    assert!(n > 0 && n <= big.len());
                    total += n;
                }
                Err(e) => break e,
            }
        };
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        assert!(total > 0);
    }

    #[test]
    fn read_into_uninit_spare_capacity() {
        let (mut a, b) = UnixStream::pair().unwrap();
        std::io::Write::write_all(&mut a, b"abc").unwrap();
        let mut v: Vec<u8> = Vec::with_capacity(16);
        let n = read_into(b.as_raw_fd(), v.spare_capacity_mut()).unwrap();
        // SAFETY: read(2) initialised exactly n bytes of the spare capacity.
        unsafe { v.set_len(n) };
        assert_eq!(v, b"abc");
    }
}
