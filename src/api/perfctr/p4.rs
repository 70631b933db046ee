//! The Pentium 4's control data (issue 47): each counter's CCCR in `evntsel` and its ESCR in
//! `p4.escr`, checked with the rules of perfctr's x86 document for a processor without
//! HyperThreading, and the event found in the emulated model by the ESCR the CCCR selects and
//! the ESCR's event select.

use crate::backend::sim::model::Model;
use crate::base::error::{Error, Result};
use crate::base::set::{Request, RequestFlags};

/// CCCR bits that control data must leave clear: OVF, OVF_PMI_T1 and the reserved ones.
const CCCR_RESERVED: u32 = 0xB800_07FF;
/// CCCR EXTENDED_CASCADE (bit 11) and CASCADE (bit 30): counter cascading, not modelled.
const CCCR_CASCADE: u32 = 1 << 11 | 1 << 30;
/// CCCR ENABLE.
const CCCR_ENABLE: u32 = 1 << 12;
/// CCCR ACTIVE_THREAD (bits 16-17): both set on a processor without HyperThreading.
const CCCR_ACTIVE_THREAD: u32 = 3 << 16;
/// CCCR FORCE_OVF.
const CCCR_FORCE_OVF: u32 = 1 << 25;
/// CCCR OVF_PMI_T0: interrupt on overflow, set exactly on i-mode counters.
const CCCR_OVF_PMI_T0: u32 = 1 << 26;

/// ESCR fields: T0_USR, T0_OS, the thread-1 CPL bits (zero without HyperThreading), the event
/// mask and the event select, and the reserved bit 31.
const ESCR_T0_USR: u32 = 1 << 2;
const ESCR_T0_OS: u32 = 1 << 3;
const ESCR_T1_CPL: u32 = 3;
const ESCR_RESERVED: u32 = 1 << 31;

/// The CCCR's ESCR select value of each ESCR, by the name before `_ESCR` (and the CRU ESCR's
/// number): Intel's table of the Pentium 4's ESCRs.
fn escr_select(name: &str) -> Option<u32> {
    let (unit, n) = name.split_once("_ESCR")?;
    Some(match unit {
        "BPU" | "MS" | "FLAME" | "IQ" => 0,
        "IS" | "TC" | "FIRM" | "ALF" => 1,
        "MOB" | "TBPU" | "SAAT" | "RAT" => 2,
        "ITLB" | "U2L" | "SSU" => 3,
        "PMH" => 4,
        "IX" | "DAC" => 5,
        "FSB" => 6,
        "BSU" => 7,
        "CRU" => match n {
            "0" | "1" => 4,
            "2" | "3" => 5,
            _ => 6,
        },
        _ => return None,
    })
}

/// `EINVAL` with its cause.
fn bad(msg: String) -> Error {
    Error::InvalidArgument(msg)
}

/// Counter `i`'s control: its CCCR, its ESCR, its `ireset`, its counter (`pmc`, without the
/// fast-RDPMC bit), whether it is an i-mode counter.
pub(super) struct Counter {
    /// `evntsel[i]`.
    pub cccr: u32,
    /// `p4.escr[i]`.
    pub escr: u32,
    /// `ireset[i]`.
    pub ireset: i32,
    /// The hardware counter.
    pub pmc: u32,
    /// An i-mode counter.
    pub imode: bool,
}

/// Counter `i`'s request.
pub(super) fn request(m: &Model, i: usize, k: &Counter) -> Result<Request> {
    let (cccr, escr, pmc, imode) = (k.cccr, k.escr, k.pmc, k.imode);
    if cccr & CCCR_RESERVED != 0 {
        return Err(bad(format!(
            "evntsel[{i}] = {cccr:#x}: CCCR bits 0xb80007ff are reserved"
        )));
    }
    if cccr & CCCR_CASCADE != 0 || cccr & CCCR_ENABLE == 0 {
        return Err(bad(format!(
            "evntsel[{i}] = {cccr:#x}: the CCCR's ENABLE must be set (cascading is not emulated)"
        )));
    }
    if cccr & CCCR_ACTIVE_THREAD != CCCR_ACTIVE_THREAD {
        return Err(bad(format!(
            "evntsel[{i}] = {cccr:#x}: ACTIVE_THREAD (0x30000) must be set without HyperThreading"
        )));
    }
    if (cccr & CCCR_OVF_PMI_T0 != 0) != imode {
        return Err(bad(format!(
            "evntsel[{i}] = {cccr:#x}: OVF_PMI_T0 (0x4000000) must be set exactly on i-mode counters"
        )));
    }
    if cccr & CCCR_FORCE_OVF != 0 && k.ireset != -1 {
        return Err(bad(format!(
            "evntsel[{i}] = {cccr:#x}: with FORCE_OVF, ireset[{i}] must be -1"
        )));
    }
    if escr & (ESCR_RESERVED | ESCR_T1_CPL) != 0 {
        return Err(bad(format!(
            "p4.escr[{i}] = {escr:#x}: bit 31 and the thread-1 CPL bits are reserved without HyperThreading"
        )));
    }
    let select = (cccr >> 13) & 7;
    let code = (escr >> 25) & 0x3f;
    let emask = (escr >> 9) & 0xffff;
    let resource = m
        .resources
        .iter()
        .position(|r| r.counters & (1 << pmc) != 0 && escr_select(r.name) == Some(select));
    let Some(resource) = resource else {
        return Err(bad(format!(
            "evntsel[{i}] = {cccr:#x}: ESCR select {select} names no ESCR of counter {pmc}"
        )));
    };
    let event = m.events.iter().find(|e| {
        e.routes
            .iter()
            .any(|r| r.resource == Some(resource as u8) && r.code == code)
    });
    let Some(event) = event else {
        return Err(bad(format!(
            "p4.escr[{i}] = {escr:#x}: event select {code:#x} is no event of {}",
            m.resources[resource].name
        )));
    };
    let mut r = Request::new(event.name)
        .on_counter(pmc)
        .flags(RequestFlags {
            user: escr & ESCR_T0_USR != 0,
            system: escr & ESCR_T0_OS != 0,
            ..RequestFlags::default()
        });
    if emask != 0 {
        r = r.attr("emask", u64::from(emask));
    }
    Ok(r)
}

/// PEBS_ENABLE (`en`) and PEBS_MATRIX_VERT (`mv`): replay tagging only, as perfctr allowed it.
pub(super) fn pebs(en: u32, mv: u32) -> Result<()> {
    let ok = if en == 0 {
        mv == 0
    } else {
        en & !0x0100_0607 == 0
            && en & (1 << 24) != 0
            && en & 0x607 != 0
            && mv & !3 == 0
            && mv & 3 != 0
    };
    if ok {
        Ok(())
    } else {
        Err(bad(format!(
            "p4.pebs_enable = {en:#x}, p4.pebs_matrix_vert = {mv:#x}: only replay tagging \
             (UOP_TAG 0x1000000 with bits 0x607; matrix bits 0-1)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sim::p4::PENTIUM4;

    #[test]
    fn every_escr_has_a_select_value() {
        for r in PENTIUM4.resources {
            assert!(escr_select(r.name).is_some(), "{}", r.name);
        }
        // No two ESCRs of one counter share a select value.
        for c in 0..18 {
            let mut seen = std::collections::HashSet::new();
            for r in PENTIUM4
                .resources
                .iter()
                .filter(|r| r.counters & (1 << c) != 0)
            {
                assert!(seen.insert(escr_select(r.name)), "counter {c}: {}", r.name);
            }
        }
    }
}
