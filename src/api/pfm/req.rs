//! The ioctl request codes. Ours: Linux's `_IO('P', 0x80 + n)`, with neither direction nor
//! size, so that tools decoding ioctl numbers (strace, valgrind) do not read the argument of
//! a request that reaches a real descriptor.
//!
//! The four requests that return an array ([`PCNTGETCNT`], [`PCNTGETIPLHIS`],
//! [`PCNT5GETCNT`], [`PCNT5GETCNT2`]) were written two ways in Tru64's life, and
//! both are served ([`array_arg`]): pfm(7)'s sample passes the address of a pointer to
//! the array (`ioctl(fd, PCNTGETCNT, &p)`), the form of our header's numbers and of a
//! pointer-sized `_IOR('P', n, struct pfcntrs *)`; the original header's
//! `_IOR('P', n, struct pfcntrs)` made the argument the array itself (`ioctl(fd, PCNTGETCNT,
//! &cntrs)`, as PAPI's Alpha substrate calls it), the form of an element-sized `_IOR`. A
//! program's source does not say which header it was written to, so ours serves pfm(7)'s (the
//! page is the contract) unless the program defines `PFCNTR_ORIGINAL_ARGS`, and a device
//! enabled or disabled with `PCNTRENABLE`/`PCNTRDISABLE`, names only the original header had,
//! takes our numbers in the original form too ([`Device::speaks_original`](super::Device::speaks_original)).

const fn r(n: u64) -> u64 {
    ((b'P' as u64) << 8) | (0x80 + n)
}
/// Linux's `_IOR('P', 0x80 + n, T)` for a `T` of `size` bytes: the direction (read) in bits
/// 30-31, the size in bits 16-29, the type in 8-15, the number in 0-7.
pub const fn ior(n: u64, size: usize) -> u64 {
    (2 << 30) | (((size as u64) & 0x3fff) << 16) | r(n)
}
const W: usize = std::mem::size_of::<usize>();
/// `sizeof(struct pfcntrs)`: three `unsigned long`s.
pub const PFCNTRS_SIZE: usize = 3 * W;
/// `sizeof(struct pfcntrs_ev5)`: four `unsigned long`s.
pub const PFCNTRS_EV5_SIZE: usize = 4 * W;
/// `sizeof(struct pfipls)`: [`super::NIPL`] `unsigned long`s.
pub const PFIPLS_SIZE: usize = super::NIPL * W;
/// Disable performance counter interrupts.
pub const PCNTDISABLE: u64 = r(0);
/// Enable performance counter interrupts.
pub const PCNTENABLE: u64 = r(1);
/// Select events and frequencies (EV4: `struct iccsr *`).
pub const PCNTSETMUX: u64 = r(2);
/// Select the data items (`int *`: `PFM_*` bits).
pub const PCNTSETITEMS: u64 = r(3);
/// Count all system activity.
pub const PCNTLOGALL: u64 = r(4);
/// Count the selected (marked) processes and mark this one.
pub const PCNTLOGSELECT: u64 = r(5);
/// Unmark this process (pfm(7) documents the operation, not its name: the name is ours).
pub const PCNTLOGUSER: u64 = r(6);
/// Clear the counts and/or the IPL histogram.
pub const PCNTCLEARCNT: u64 = r(7);
/// Read the counts (`struct pfcntrs **`).
pub const PCNTGETCNT: u64 = r(8);
/// Size of the profile data (`long *`).
pub const PCNTGETRSIZE: u64 = r(9);
/// Read the IPL histogram(s) (`struct pfipls **`).
pub const PCNTGETIPLHIS: u64 = r(10);
/// Kernel profiling of callers (not available on Linux: kernel profiling is never on).
pub const PCNTCALLER: u64 = r(11);
/// Kernel profiling address range (`struct pfaddr *`; not available on Linux).
pub const PCNTSETKADDR: u64 = r(12);
/// Kernel profiling range and stride (`struct pfrange *`; not available on Linux).
pub const PCNTSETKRANGE: u64 = r(13);
/// User profiling address range (`struct pfaddr *`).
pub const PCNTSETUADDR: u64 = r(14);
/// User profiling range and stride (`struct pfrange *`).
pub const PCNTSETURANGE: u64 = r(15);
/// The original header's name for [`PCNTENABLE`] (pfm(7) lists one enable request): does
/// what it does, and says the program was written to that header. No argument.
pub const PCNTRENABLE: u64 = r(16);
/// The original header's name for [`PCNTDISABLE`] (see [`PCNTRENABLE`]). No argument.
pub const PCNTRDISABLE: u64 = r(17);
/// EV5: select the events of the three counters (`long *`: `PF5_MUXn_*` ORed).
pub const PCNT5MUX: u64 = r(32);
/// EV5: select the interrupt frequencies (`long *`: `PF5_Cn_INT_EVERY_*` ORed).
pub const PCNT5FREQ: u64 = r(33);
/// EV5: enable the selected counters (`union pmctrs_ev5 *`).
pub const PCNT5ENABLE: u64 = r(34);
/// EV5: zero and enable the selected counters (`union pmctrs_ev5 *`).
pub const PCNT5RESTART: u64 = r(35);
/// EV5: disable the selected counters (`union pmctrs_ev5 *`).
pub const PCNT5DISABLE: u64 = r(36);
/// EV5: write the selected raw counters (`union pmctrs_ev5 *`).
pub const PCNT5WRITE: u64 = r(37);
/// EV5: the contexts to count in (`long *`: `PF5_CTXT_*` ORed).
pub const PCNT5CTXT: u64 = r(38);
/// EV5: read the counts (`struct pfcntrs_ev5 **`).
pub const PCNT5GETCNT: u64 = r(39);
/// EV5: read the counts shifted by the counter width plus the raw counters.
pub const PCNT5GETCNT2: u64 = r(40);
/// EV5: read the raw counters of the selected CPU (`union pmctrs_ev5 *`).
pub const PCNT5READCNTRS: u64 = r(41);

/// Where a request that returns an array finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrayArg {
    /// The argument is the array (the original header's form).
    Here,
    /// The argument is the address of a pointer to the array (pfm(7)'s sample).
    Behind,
    /// Our header's own number: [`ArrayArg::Behind`], unless the device was told the
    /// program speaks the original header ([`super::Device::speaks_original`]).
    Header,
}

/// The array request `request` stands for and where its array is: our header's number
/// ([`ArrayArg::Header`]), `_IOR` of the element ([`ArrayArg::Here`]) or of a pointer
/// ([`ArrayArg::Behind`]). `None` for any other request, including these numbers with
/// another size or direction.
pub fn array_arg(request: u64) -> Option<(u64, ArrayArg)> {
    [
        (PCNTGETCNT, PFCNTRS_SIZE),
        (PCNTGETIPLHIS, PFIPLS_SIZE),
        (PCNT5GETCNT, PFCNTRS_EV5_SIZE),
        (PCNT5GETCNT2, PFCNTRS_EV5_SIZE),
    ]
    .into_iter()
    .find_map(|(canon, size)| {
        let n = (canon & 0xff) - 0x80;
        if request == canon {
            Some((canon, ArrayArg::Header))
        } else if request == ior(n, size) {
            Some((canon, ArrayArg::Here))
        } else if request == ior(n, W) {
            Some((canon, ArrayArg::Behind))
        } else {
            None
        }
    })
}
