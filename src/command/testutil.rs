//! Test helper shared by the unit tests that build requests by hand (the
//! command table, the router, the ACL, COMMAND GETKEYS): the bytes and
//! ranges behind an [`Args`] view, laid out as the scanner would cut them.

use super::Args;
use std::ops::Range;

/// Owns the bytes and ranges behind an [`Args`] view.
pub(crate) struct Call {
    buf: Vec<u8>,
    ranges: Vec<Range<usize>>,
}

impl Call {
    pub(crate) fn new(argv: &[&[u8]]) -> Call {
        let mut buf = Vec::new();
        let mut ranges = Vec::new();
        for a in argv {
            let start = buf.len();
            buf.extend_from_slice(a);
            ranges.push(start..buf.len());
            buf.extend_from_slice(b"\r\n"); // arguments need not be adjacent
        }
        Call { buf, ranges }
    }

    /// One argument per word.
    pub(crate) fn words(words: &[&str]) -> Call {
        let argv: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
        Call::new(&argv)
    }

    /// Arguments separated by single spaces.
    pub(crate) fn of(line: &str) -> Call {
        let argv: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        Call::new(&argv)
    }

    /// Arguments separated by any whitespace.
    pub(crate) fn line(line: &str) -> Call {
        let argv: Vec<&[u8]> = line.split_whitespace().map(str::as_bytes).collect();
        Call::new(&argv)
    }

    pub(crate) fn args(&self) -> Args<'_> {
        Args {
            buf: &self.buf,
            ranges: &self.ranges,
        }
    }
}
