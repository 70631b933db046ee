//! Relocation-free strings and short lists for the library's static tables.
//!
//! A `&'static str` (or `&'static [T]`) in a `static` is a pointer, and a pointer in a shared
//! library is a run-time relocation: the dynamic linker writes every one at load, so the page
//! holding it is copied on write in every process that loads the library, counting or not
//! (issue 48: 3582 relative relocations on x86-64 before the emulated PMUs' tables moved to
//! these types). A [`Text`] or an [`Inline`] holds its bytes or items in place, filled at
//! compile time by a `const fn`, so the tables made of them stay in read-only pages shared
//! with the file and are never touched unless used. They read as `&str` and `&[T]` through
//! [`Deref`], and compare with string slices directly.

use std::fmt;
use std::ops::Deref;

/// `src` copied to the front of an array of `N`, the rest `fill`, with its length; more than
/// `N` (or 255) items fail the build with `what`.
const fn place<T: Copy, const N: usize>(src: &[T], fill: T, what: &str) -> (u8, [T; N]) {
    assert!(src.len() <= N && src.len() <= u8::MAX as usize, "{}", what);
    let mut out = [fill; N];
    let mut i = 0;
    while i < src.len() {
        out[i] = src[i];
        i += 1;
    }
    (src.len() as u8, out)
}

/// A string of at most `N` bytes held in place (no pointer): see the module's documentation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Text<const N: usize> {
    len: u8,
    bytes: [u8; N],
}

impl<const N: usize> Text<N> {
    /// `s` copied in place; a string longer than `N` bytes (or 255) fails the build.
    pub const fn new(s: &str) -> Self {
        let (len, bytes) = place(s.as_bytes(), 0, "Text: string too long");
        Text { len, bytes }
    }

    /// The string.
    pub fn as_str(&self) -> &str {
        // Not checked again at every read (a table's lookups read many): the fields are
        // private and `new`, the only way to make one, copies a whole `&str`.
        // SAFETY: the first `len` bytes are that `&str`'s, so they are UTF-8.
        unsafe { std::str::from_utf8_unchecked(&self.bytes[..self.len as usize]) }
    }
}

impl<const N: usize> Deref for Text<N> {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

// Hashed and ordered as the string it holds, so that a set of texts can be searched with a
// `&str` (`Borrow<str>`).
impl<const N: usize> std::hash::Hash for Text<N> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl<const N: usize> PartialOrd for Text<N> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<const N: usize> Ord for Text<N> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl<const N: usize> std::borrow::Borrow<str> for Text<N> {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl<const N: usize> fmt::Debug for Text<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl<const N: usize> fmt::Display for Text<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl<const N: usize> PartialEq<str> for Text<N> {
    fn eq(&self, other: &str) -> bool {
        &self.bytes[..self.len as usize] == other.as_bytes()
    }
}

impl<const N: usize> PartialEq<&str> for Text<N> {
    fn eq(&self, other: &&str) -> bool {
        &self.bytes[..self.len as usize] == other.as_bytes()
    }
}

impl<const N: usize> PartialEq<Text<N>> for str {
    fn eq(&self, other: &Text<N>) -> bool {
        other == self
    }
}

impl<const N: usize> PartialEq<Text<N>> for &str {
    fn eq(&self, other: &Text<N>) -> bool {
        other == *self
    }
}

/// At most `N` items held in place (no pointer): see the module's documentation.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Inline<T: Copy, const N: usize> {
    len: u8,
    items: [T; N],
}

impl<T: Copy, const N: usize> Inline<T, N> {
    /// `items` copied in place, the unused places filled with `fill`; more than `N` items (or
    /// 255) fail the build.
    pub const fn new(items: &[T], fill: T) -> Self {
        let (len, items) = place(items, fill, "Inline: too many items");
        Inline { len, items }
    }

    /// The items.
    pub fn as_slice(&self) -> &[T] {
        &self.items[..self.len as usize]
    }
}

impl<T: Copy, const N: usize> Deref for Inline<T, N> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<'a, T: Copy, const N: usize> IntoIterator for &'a Inline<T, N> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<T: Copy, const N: usize> IntoIterator for Inline<T, N> {
    type Item = T;
    type IntoIter = std::iter::Take<std::array::IntoIter<T, N>>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter().take(self.len as usize)
    }
}

impl<T: Copy + PartialEq, const N: usize, const M: usize> PartialEq<[T; M]> for Inline<T, N> {
    fn eq(&self, other: &[T; M]) -> bool {
        **self == other[..]
    }
}

impl<T: Copy + PartialEq, const N: usize, const M: usize> PartialEq<&[T; M]> for Inline<T, N> {
    fn eq(&self, other: &&[T; M]) -> bool {
        **self == other[..]
    }
}

impl<T: Copy + fmt::Debug, const N: usize> fmt::Debug for Inline<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_reads_back_and_compares() {
        const T: Text<8> = Text::new("Cycle");
        assert_eq!(T.as_str(), "Cycle");
        assert_eq!(&*T, "Cycle");
        assert_eq!(T, "Cycle");
        assert_eq!("Cycle", T);
        assert_ne!(T, "Cycl");
        assert_ne!(T, "Cycles");
        assert_eq!(format!("{T} {T:?}"), "Cycle \"Cycle\"");
        const E: Text<0> = Text::new("");
        assert_eq!(E.as_str(), "");
        let set: std::collections::BTreeSet<Text<8>> = [T, Text::new("Abc")].into();
        assert!(set.contains("Cycle") && !set.contains("Cyc"));
        assert_eq!(set.iter().next().map(|t| t.as_str()), Some("Abc"));
    }

    #[test]
    fn inline_reads_back_its_items_only() {
        const L: Inline<u32, 4> = Inline::new(&[7, 9], 0);
        assert_eq!(&*L, &[7, 9]);
        assert_eq!(L.iter().sum::<u32>(), 16);
        assert_eq!((&L).into_iter().count(), 2);
        assert_eq!(L.into_iter().collect::<Vec<_>>(), [7, 9]);
        let same: &[u32; 2] = &[7, 9];
        assert_eq!(L, [7, 9]);
        assert_eq!(L, same);
        assert_ne!(L, [7]);
        assert_ne!(L, [7, 9, 0]);
        assert_eq!(format!("{L:?}"), "[7, 9]");
    }
}
