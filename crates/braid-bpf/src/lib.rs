//! The initial TCP retransmission timeout of the sockets of one cgroup, set by a BPF `sock_ops`
//! program.
//!
//! Linux has no sysctl or route option for the timeout a connection uses before its first RTT
//! sample: `TCP_TIMEOUT_INIT` is 1 s (RFC 6298 2.1), compiled in. It is what a lost SYN waits
//! before its first retransmission, and what a server's request socket waits before it sends
//! its SYN-ACK again. Hosts before RFC 6298 (2011) used RFC 2988's 3 s, which the testbed's
//! scenarios of the PluriBus era ask for (`[tcp] initial_rto_ms = 3000`). The supported way to
//! change it is a `sock_ops` program that answers `BPF_SOCK_OPS_TIMEOUT_INIT` with the timeout
//! in jiffies (the kernel's `tcp_timeout_init()`; samples/bpf/tcp_synrto_kern.c). The kernel
//! asks it for:
//!
//! - a connecting socket (`tcp_connect_init`: the SYN's timer), in the cgroup of the process
//!   that created the socket;
//! - a request socket (`tcp_conn_request`: the SYN-ACK's timer, kept in `req->timeout` since
//!   Linux 5.15); the program runs for the listener (`sk_to_full_sk`), so in the cgroup of the
//!   process that created the listening socket.
//!
//! The program is six instructions, assembled here and loaded with two `bpf(2)` system calls,
//! so neither clang nor libbpf is needed. [`TimeoutInit::attach`] attaches it to a cgroup-v2
//! directory with a BPF link: it stays attached while the returned value lives and is detached
//! when it is dropped, or when the process dies, so a crash leaves no program behind.

use std::ffi::c_long;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// `BPF_PROG_TYPE_SOCK_OPS` (include/uapi/linux/bpf.h).
const BPF_PROG_TYPE_SOCK_OPS: u32 = 13;
/// `BPF_CGROUP_SOCK_OPS`, the attach type of a cgroup's sock_ops programs.
const BPF_CGROUP_SOCK_OPS: u32 = 3;
/// `BPF_SOCK_OPS_TIMEOUT_INIT`, the operation that asks for the initial timeout.
const BPF_SOCK_OPS_TIMEOUT_INIT: i32 = 1;
/// `bpf(2)` commands.
const BPF_PROG_LOAD: c_long = 5;
const BPF_LINK_CREATE: c_long = 28;
/// Offsets in `struct bpf_sock_ops`: `op` is the first field, `reply` the union after it.
const SOCK_OPS_OP: i16 = 0;
const SOCK_OPS_REPLY: i16 = 4;
/// The largest timeout the kernel uses (`TCP_RTO_MAX`, 120 s) at the highest HZ (1000).
pub const MAX_JIFFIES: u32 = 120_000;

/// Why the program could not be put in place.
#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    /// The timeout is 0 (the kernel would ignore it) or above [`MAX_JIFFIES`].
    #[error("initial timeout of {0} jiffies is outside 1..={MAX_JIFFIES}")]
    Timeout(u32),
    /// The cgroup-v2 directory could not be opened.
    #[error("cannot open cgroup directory {path}: {source}")]
    Cgroup {
        /// The directory.
        path: PathBuf,
        /// What `open` said.
        source: io::Error,
    },
    /// `BPF_PROG_LOAD` refused the program (no BPF in this kernel, not root, or the verifier).
    #[error("the kernel refused to load the BPF sock_ops program (BPF_PROG_LOAD: {source}){}", verifier(.log))]
    Load {
        /// The system call's error.
        source: io::Error,
        /// The verifier's log, if it wrote one.
        log: String,
    },
    /// `BPF_LINK_CREATE` refused to attach it (no cgroup BPF in this kernel, or older than 5.7).
    #[error("the kernel refused to attach the BPF sock_ops program to cgroup {path} (BPF_LINK_CREATE: {source})")]
    Attach {
        /// The cgroup directory.
        path: PathBuf,
        /// The system call's error.
        source: io::Error,
    },
}

fn verifier(log: &str) -> String {
    if log.is_empty() { String::new() } else { format!("; verifier: {log}") }
}

/// One eBPF instruction (`struct bpf_insn`): opcode, destination and source registers in one
/// byte, a 16-bit offset and a 32-bit immediate, in this host's byte order as the kernel reads
/// them.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[0] = code;
    // `dst_reg:4, src_reg:4` bit-fields: the first one takes the low nibble on little-endian
    // hosts and the high nibble on big-endian ones.
    b[1] = if cfg!(target_endian = "little") { (dst & 0x0f) | (src << 4) } else { (dst << 4) | (src & 0x0f) };
    b[2..4].copy_from_slice(&off.to_ne_bytes());
    b[4..8].copy_from_slice(&imm.to_ne_bytes());
    b
}

/// The program, in the kernel's instruction format:
///
/// ```text
/// r2 = *(u32 *)(r1 + 0)          ; skops->op
/// if r2 != TIMEOUT_INIT goto +2   ; other operations: leave the reply alone
/// r3 = jiffies
/// *(u32 *)(r1 + 4) = r3           ; skops->reply (a register store: the verifier refuses
///                                 ; immediate stores into the context)
/// r0 = 1                          ; 1 = proceed (anything else fails the socket's call)
/// exit
/// ```
pub fn program(jiffies: u32) -> Result<Vec<u8>, BpfError> {
    if jiffies == 0 || jiffies > MAX_JIFFIES {
        return Err(BpfError::Timeout(jiffies));
    }
    let code = [
        insn(0x61, 2, 1, SOCK_OPS_OP, 0),               // BPF_LDX | BPF_MEM | BPF_W
        insn(0x55, 2, 0, 2, BPF_SOCK_OPS_TIMEOUT_INIT), // BPF_JMP | BPF_JNE | BPF_K
        insn(0xb7, 3, 0, 0, jiffies as i32),            // BPF_ALU64 | BPF_MOV | BPF_K
        insn(0x63, 1, 3, SOCK_OPS_REPLY, 0),            // BPF_STX | BPF_MEM | BPF_W
        insn(0xb7, 0, 0, 0, 1),                         // BPF_ALU64 | BPF_MOV | BPF_K
        insn(0x95, 0, 0, 0, 0),                         // BPF_JMP | BPF_EXIT
    ];
    Ok(code.concat())
}

/// The `BPF_PROG_LOAD` part of `union bpf_attr`, up to `expected_attach_type`; the kernel
/// treats the fields after it as zero.
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// The `BPF_LINK_CREATE` part of `union bpf_attr`, up to `flags`.
#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_fd: u32,
    attach_type: u32,
    flags: u32,
}

/// `bpf(cmd, attr, size)`: the new file descriptor it returns.
fn bpf<T>(cmd: c_long, attr: &T) -> io::Result<OwnedFd> {
    // SAFETY: `attr` is a live, initialised `#[repr(C)]` prefix of `union bpf_attr` for `cmd`,
    // and the size passed is its own, so the kernel reads only memory we own; any pointers
    // inside it point to buffers that outlive the call (see the callers). The kernel writes
    // nothing into `attr` for these commands.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *const T, std::mem::size_of::<T>()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(r).map_err(|_| io::Error::other("bpf(2) returned an out-of-range descriptor"))?;
    // SAFETY: on success both commands return a new file descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn load(code: &[u8], log: Option<&mut [u8]>) -> io::Result<OwnedFd> {
    const LICENSE: &[u8] = b"GPL\0";
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_SOCK_OPS,
        insn_cnt: (code.len() / 8) as u32,
        insns: code.as_ptr() as u64,
        license: LICENSE.as_ptr() as u64,
        ..ProgLoadAttr::default()
    };
    let name = b"braid_rto_init";
    attr.prog_name[..name.len()].copy_from_slice(name);
    if let Some(buf) = log {
        attr.log_level = 1;
        attr.log_size = buf.len() as u32;
        attr.log_buf = buf.as_mut_ptr() as u64;
    }
    bpf(BPF_PROG_LOAD, &attr)
}

/// The program, attached to a cgroup: every TCP socket created by a process in that cgroup (and
/// every connection its listeners accept) starts with the chosen initial retransmission
/// timeout. Detached on drop.
#[derive(Debug)]
pub struct TimeoutInit {
    // The link holds the attachment; the program's own descriptor is not needed after it.
    _link: OwnedFd,
    jiffies: u32,
}

impl TimeoutInit {
    /// Loads the program answering `BPF_SOCK_OPS_TIMEOUT_INIT` with `jiffies` (the kernel's
    /// clock ticks: `ms * HZ / 1000`) and attaches it to the cgroup-v2 directory `cgroup`.
    /// Needs root (CAP_BPF and CAP_NET_ADMIN), `CONFIG_BPF_SYSCALL` and `CONFIG_CGROUP_BPF`.
    pub fn attach(cgroup: &Path, jiffies: u32) -> Result<TimeoutInit, BpfError> {
        let code = program(jiffies)?;
        let dir = File::open(cgroup).map_err(|source| BpfError::Cgroup { path: cgroup.to_path_buf(), source })?;
        let prog = match load(&code, None) {
            Ok(fd) => fd,
            Err(source) => {
                // Load again with the verifier's log, to say why (a log buffer that is too
                // small fails the load by itself, so it is only asked for after a failure).
                let mut log = vec![0u8; 64 * 1024];
                let _ = load(&code, Some(&mut log));
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let log = String::from_utf8_lossy(&log[..end]).trim().to_string();
                return Err(BpfError::Load { source, log });
            }
        };
        let attr = LinkCreateAttr {
            prog_fd: prog.as_raw_fd() as u32,
            target_fd: dir.as_raw_fd() as u32,
            attach_type: BPF_CGROUP_SOCK_OPS,
            flags: 0,
        };
        let link =
            bpf(BPF_LINK_CREATE, &attr).map_err(|source| BpfError::Attach { path: cgroup.to_path_buf(), source })?;
        Ok(TimeoutInit { _link: link, jiffies })
    }

    /// The timeout the program answers, in jiffies.
    pub fn jiffies(&self) -> u32 {
        self.jiffies
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_encodes_as_llvm_would() {
        // The bytes llvm-objdump shows for these instructions (little-endian host).
        let p = program(750).unwrap();
        let want: [[u8; 8]; 6] = [
            [0x61, 0x12, 0, 0, 0, 0, 0, 0],
            [0x55, 0x02, 2, 0, 1, 0, 0, 0],
            [0xb7, 0x03, 0, 0, 0xee, 0x02, 0, 0],
            [0x63, 0x31, 4, 0, 0, 0, 0, 0],
            [0xb7, 0x00, 0, 0, 1, 0, 0, 0],
            [0x95, 0x00, 0, 0, 0, 0, 0, 0],
        ];
        if cfg!(target_endian = "little") {
            assert_eq!(p, want.concat());
        }
        assert_eq!(p.len(), 6 * 8);
    }

    #[test]
    fn timeouts_out_of_range_are_refused() {
        assert!(matches!(program(0), Err(BpfError::Timeout(0))));
        assert!(matches!(program(MAX_JIFFIES + 1), Err(BpfError::Timeout(_))));
        assert!(program(MAX_JIFFIES).is_ok());
    }
}
