//! Binding a libcpc set to a CPU (`cpc_bind_cpu`): the processor checks, the process-wide
//! table of CPUs a set is bound to (one set per CPU; other processes are not known), and the
//! binding thread's move to that CPU, undone when the [`CpuPin`] is dropped
//! (`cpc_unbind`'s documented effect: the thread gets its previous affinity back).

use std::sync::Mutex;

use crate::base::error::{Error, Result};

/// CPUs that a set of this process is bound to.
static BOUND: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Whether CPU `cpu` is online (CPU 0 and CPUs without an `online` file always are).
fn online(cpu: u32) -> bool {
    std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu{cpu}/online"))
        .map_or(true, |s| s.trim() != "0")
}

/// Processor `id` if it exists and is online: [`Error::NoSuchProcessor`] beyond the machine's
/// processors, [`Error::ProcessorOffline`] when offline. Changes nothing.
pub fn processor(id: i32) -> Result<u32> {
    // SAFETY: plain libc call (a `c_long`: 32 bits on 32-bit targets).
    #[allow(clippy::useless_conversion)]
    let ncpu = i64::from(unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) });
    let cpu = match u32::try_from(id) {
        Ok(cpu) if i64::from(cpu) < ncpu && (cpu as usize) < libc::CPU_SETSIZE as usize => cpu,
        _ => {
            return Err(Error::NoSuchProcessor {
                id: i64::from(id),
                ncpu,
            })
        }
    };
    if !online(cpu) {
        return Err(Error::ProcessorOffline(cpu));
    }
    Ok(cpu)
}

/// The calling thread moved to one CPU, which a set of this process is bound to; dropping it
/// gives the thread its affinity back and frees the CPU for another set.
pub struct CpuPin {
    cpu: u32,
    tid: i32,
    old: Box<libc::cpu_set_t>,
}

impl CpuPin {
    /// Claim `cpu` for a set ([`Error::ProcessorTaken`] when a set of this process has it)
    /// and move the calling thread there ([`Error::PbindFailed`] when it cannot be moved).
    pub fn take(cpu: u32) -> Result<CpuPin> {
        {
            let mut bound = BOUND.lock().unwrap_or_else(|p| p.into_inner());
            if bound.contains(&cpu) {
                return Err(Error::ProcessorTaken(cpu));
            }
            bound.push(cpu);
        }
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: cpu_set_t is plain data; the calls get valid pointers.
        let (old, moved) = unsafe {
            let mut old: Box<libc::cpu_set_t> = Box::new(std::mem::zeroed());
            let got = libc::sched_getaffinity(0, size, &mut *old) == 0;
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu as usize, &mut one);
            (old, got && libc::sched_setaffinity(0, size, &one) == 0)
        };
        if !moved {
            let errno = std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINVAL);
            release(cpu);
            return Err(Error::PbindFailed { cpu, errno });
        }
        Ok(CpuPin {
            cpu,
            tid: crate::base::sys::gettid(),
            old,
        })
    }

    /// The CPU.
    pub fn cpu(&self) -> u32 {
        self.cpu
    }
}

fn release(cpu: u32) {
    BOUND
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|&c| c != cpu);
}

impl Drop for CpuPin {
    fn drop(&mut self) {
        // SAFETY: a cpu_set_t saved by sched_getaffinity.
        unsafe {
            libc::sched_setaffinity(self.tid, std::mem::size_of::<libc::cpu_set_t>(), &*self.old)
        };
        release(self.cpu);
    }
}

impl std::fmt::Debug for CpuPin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CpuPin(cpu {}, thread {})", self.cpu, self.tid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processors_beyond_the_machine_are_refused_and_cpu_0_exists() {
        assert_eq!(processor(0), Ok(0));
        assert!(matches!(
            processor(-1),
            Err(Error::NoSuchProcessor { id: -1, .. })
        ));
        assert!(matches!(
            processor(i32::MAX),
            Err(Error::NoSuchProcessor { .. })
        ));
    }

    fn affinity() -> libc::cpu_set_t {
        // SAFETY: plain data and valid pointers.
        unsafe {
            let mut s: libc::cpu_set_t = std::mem::zeroed();
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut s);
            s
        }
    }

    #[test]
    fn one_pin_per_cpu_and_the_affinity_comes_back() {
        let before = affinity();
        // A CPU this thread may run on (CPU 0 may be outside a container's set).
        let cpu = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: reading plain data.
            .find(|&c| unsafe { libc::CPU_ISSET(c, &before) })
            .unwrap() as u32;
        let pin = CpuPin::take(cpu).expect("this thread may move to a CPU of its own set");
        assert_eq!(pin.cpu(), cpu);
        assert_eq!(CpuPin::take(cpu).unwrap_err(), Error::ProcessorTaken(cpu));
        drop(pin);
        // SAFETY: comparing plain data.
        assert!(unsafe { libc::CPU_EQUAL(&before, &affinity()) });
        drop(CpuPin::take(cpu).expect("free again"));
    }
}
