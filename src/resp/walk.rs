//! Walking a whole RESP frame already in hand, without parsing it into
//! values: the arguments of a multibulk request, or the items of an array
//! reply of bulks and nils (what the reply cache reads of a GET or MGET
//! and of its reply). Bytes are borrowed from the frame; nothing is
//! allocated. A frame that is not of that shape ends the walk early.

/// The bulk strings of a frame from `pos` on, in order: the arguments of
/// a multibulk request (`*2 $3 GET $1 k`), or the items of an array reply
/// of bulks and nils (a nil is given as its own frame, `$-1` or `_`).
#[derive(Clone)]
pub struct Bulks<'a> {
    frame: &'a [u8],
    pos: usize,
    /// Give whole item frames (replies) rather than the payloads.
    whole: bool,
}

impl<'a> Iterator for Bulks<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        let f = self.frame;
        let start = self.pos;
        match f.get(start)? {
            b'_' => {
                self.pos = start + 3;
                return f.get(start..start + 3);
            }
            b'$' => {}
            _ => return None,
        }
        let eol = start + f.get(start..)?.iter().position(|&b| b == b'\n')?;
        let digits = f.get(start + 1..eol.checked_sub(1)?)?;
        if digits == b"-1" {
            self.pos = eol + 1;
            return f.get(start..eol + 1);
        }
        let len = usize::try_from(crate::resp::parse_i64(digits)?).ok()?;
        let body = eol + 1;
        self.pos = body + len + 2;
        if self.whole {
            f.get(start..body + len + 2)
        } else {
            f.get(body..body + len)
        }
    }
}

fn after_header(frame: &[u8]) -> Option<usize> {
    if frame.first() != Some(&b'*') {
        return None;
    }
    Some(frame.iter().position(|&b| b == b'\n')? + 1)
}

/// The arguments of a multibulk request frame.
pub fn frame_args(frame: &[u8]) -> Bulks<'_> {
    Bulks {
        frame,
        pos: after_header(frame).unwrap_or(frame.len()),
        whole: false,
    }
}

/// The item frames of an array reply (None: not an array).
pub fn reply_items(frame: &[u8]) -> Option<Bulks<'_>> {
    Some(Bulks {
        frame,
        pos: after_header(frame)?,
        whole: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_of_a_request_and_the_items_of_a_reply_are_found() {
        let f = b"*3\r\n$4\r\nMGET\r\n$5\r\nhello\r\n$0\r\n\r\n";
        let args: Vec<&[u8]> = frame_args(f).collect();
        assert_eq!(args, [&b"MGET"[..], b"hello", b""]);
        assert_eq!(frame_args(b"garbage").count(), 0);
        let r = b"*4\r\n$1\r\na\r\n$-1\r\n_\r\n$2\r\nbc\r\n";
        let items: Vec<&[u8]> = reply_items(r).unwrap().collect();
        assert_eq!(
            items,
            [&b"$1\r\na\r\n"[..], b"$-1\r\n", b"_\r\n", b"$2\r\nbc\r\n"]
        );
        assert!(reply_items(b"-ERR x\r\n").is_none());
    }
}
