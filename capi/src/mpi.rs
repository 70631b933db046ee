//! The counting half of the PMPI layer `libperfcompat-mpi.so` (`perfcompat_mpi.h`).
//!
//! The layer itself (`mpi/perfcompat_mpi.c`, built with the MPI's own `mpicc`) intercepts
//! `MPI_Init`, `MPI_Init_thread` and `MPI_Finalize` (and their Fortran spellings) and does only
//! what needs MPI: it calls [`perfcompat_mpi_start`] after `PMPI_Init`, and in `MPI_Finalize`,
//! before `PMPI_Finalize`, [`perfcompat_mpi_finish`] on every rank, gathers the fixed-size
//! records to rank 0 with `PMPI_Gather`, where [`perfcompat_mpi_report`] prints the job's
//! report. What is counted and how the report looks is the engine's
//! (`perfcompat::commands::perfex::mpi`).

use std::ffi::{c_char, c_int};

use perfcompat::commands::perfex::mpi;
use perfcompat::Error;

use crate::edge::{run, Tell};

/// The size of one rank's record: the buffer each rank passes to [`perfcompat_mpi_finish`]
/// and gathers to rank 0.
pub const PERFCOMPAT_MPI_RECORD_BYTES: usize = 8192;
const _: () = assert!(PERFCOMPAT_MPI_RECORD_BYTES == mpi::RECORD_BYTES);

/// Start counting this rank: the calling thread and every thread and child process it creates
/// from now on, for the events named by `PERFCOMPAT_PRELOAD_EVENTS` (R10000 numbers mapped as
/// for `perfex -e`, or `all`), else `T5_EVENT0`/`T5_EVENT1`, else event 0. Counting that the
/// `PERFCOMPAT_PRELOAD_EVENTS` constructor started when the library was loaded is stopped
/// first, so the rank does not also print a report of its own at exit.
///
/// # Returns
/// 0, or -1 with `errno` set and a message on stderr (an event the host cannot count, a bad
/// variable); the rank then runs uncounted and its record is empty.
#[no_mangle]
pub extern "C" fn perfcompat_mpi_start() -> c_int {
    run(Tell::Stderr, c"perfcompat_mpi_start", -1, || {
        drop(crate::preload::take_session());
        mpi::start_rank().map(|()| 0)
    })
}
/// Stop counting and write rank `rank`'s record into `record[..len]` (NUL-padded text;
/// [`PERFCOMPAT_MPI_RECORD_BYTES`] is enough).
///
/// # Returns
/// 0, or -1 with `errno` set: `EINVAL` for a NULL buffer or a negative rank, `ENOSPC` when the
/// record does not fit, `ESRCH` when this rank is not counting (then `record` is zeroed, which
/// [`perfcompat_mpi_report`] reports as a missing rank).
///
/// # Safety
/// `record` is NULL or points to `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn perfcompat_mpi_finish(
    rank: c_int,
    record: *mut c_char,
    len: usize,
) -> c_int {
    run(Tell::Stderr, c"perfcompat_mpi_finish", -1, || {
        if record.is_null() || rank < 0 {
            return Err(Error::BadArgument("NULL record buffer or negative rank"));
        }
        // SAFETY: the caller promises `len` writable bytes.
        let out = unsafe { std::slice::from_raw_parts_mut(record.cast::<u8>(), len) };
        mpi::finish_rank(rank as u32, out).map(|()| 0)
    })
}

/// On rank 0: print the report of the `nranks` records in `records` (each `record_len` bytes,
/// in rank order) to the file named by `PERFCOMPAT_MPI_OUTPUT` (created or truncated), else to
/// standard error; as JSON when `PERFCOMPAT_MPI_FORMAT` is `json`, else as text.
///
/// # Returns
/// 0, or -1 with `errno` set to `EINVAL` and a message on stderr: NULL, a bad count, records that
/// are not ours or disagree on the events, an output file that cannot be written.
///
/// # Safety
/// `records` is NULL or points to `nranks * record_len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn perfcompat_mpi_report(
    records: *const c_char,
    nranks: c_int,
    record_len: usize,
) -> c_int {
    run(Tell::Stderr, c"perfcompat_mpi_report", -1, || {
        if records.is_null() || nranks <= 0 || record_len == 0 {
            return Err(Error::BadArgument(
                "NULL records, or no ranks, or records of size 0",
            ));
        }
        let total = (nranks as usize)
            .checked_mul(record_len)
            .ok_or(Error::BadArgument("too many records"))?;
        // SAFETY: the caller promises `nranks * record_len` readable bytes.
        let bytes = unsafe { std::slice::from_raw_parts(records.cast::<u8>(), total) };
        mpi::merge_buffers(bytes, record_len).and_then(|m| mpi::write_report(&m))?;
        Ok(0)
    })
}
