//! The netdev under an RDMA device, from `rdma link show` (shared by
//! `tests/rxe_faults.rs` through `support` and by `examples/soak.rs`
//! through a `#[path]` include).

/// The netdev under RDMA device `dev` (from `rdma link show`).
pub fn netdev_of(dev: &str) -> Option<String> {
    let out = std::process::Command::new("rdma")
        .args(["link", "show"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.contains(&format!("{dev}/")))?;
    let mut it = line.split_whitespace();
    while let Some(w) = it.next() {
        if w == "netdev" {
            return it.next().map(str::to_owned);
        }
    }
    None
}
