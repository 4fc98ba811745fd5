//! Configuration: the engine's `MC_ADAPTIVE_CC_*` variables (RFC 4162,
//! parsed by railyard-core) and the preload's own `MC_RAILYARD_*` sizes.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `MC_ADAPTIVE_CC_MODE` and every `MC_ADAPTIVE_CC_*` | `off` | the congestion controller, as in the engine |
//! | `MC_RAILYARD_TOKENS` | 65536 | posted work requests in flight at once, process-wide |
//! | `MC_RAILYARD_QPS` | 512 | RC QPs managed at once (more are passed through, counted) |
//! | `MC_RAILYARD_QP_DEPTH` | 1024 | work requests outstanding per QP (the provider's own send queue is the tighter bound; a full one is backpressure) |
//! | `MC_RAILYARD_ROUTES` | 256 | CC route domains (local device × remote GID / LID); more routes share by hash |
//! | `MC_RAILYARD_DEFER_WRS` | the QP's `max_send_wr` | work requests a QP may hold back while CC defers them |
//! | `MC_RAILYARD_STATS` | unset | a file: every counter as JSON at exit and on `SIGUSR1` |
//! | `MC_RAILYARD_LOG` | `warn` | `off`, `warn`, `info` or `debug` on stderr (control path only; nothing per work request) |
//!
//! A value that does not parse is a [`ConfigError`] naming the variable;
//! the preload then stays out of the way entirely (no hook changes
//! anything) and says so once.

use std::fmt;
use std::path::PathBuf;

use railyard_core::cc::{CcConfig, ConfigError as CcConfigError};

/// How chatty the preload is on stderr (control path only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// Nothing at all.
    Off,
    /// Refusals and things passed through untouched (once each).
    Warn,
    /// Start-up and QP lifecycle.
    Info,
    /// Everything above plus endpoint retire / reclaim detail.
    Debug,
}

/// The preload's configuration.
#[derive(Clone, Debug)]
pub struct PreloadConfig {
    /// The congestion controller (mode `off` by default).
    pub cc: CcConfig,
    /// Token pool capacity.
    pub tokens: u32,
    /// Managed QPs at most.
    pub qps: u32,
    /// Work requests outstanding per QP at most.
    pub qp_depth: u32,
    /// CC route domains.
    pub routes: u32,
    /// Deferral queue depth per QP (`None`: the QP's `max_send_wr`).
    pub defer_wrs: Option<u32>,
    /// Where to write the counters.
    pub stats: Option<PathBuf>,
    /// stderr verbosity.
    pub log: LogLevel,
}

impl Default for PreloadConfig {
    fn default() -> Self {
        Self {
            cc: CcConfig::default(),
            tokens: 65536,
            qps: 512,
            qp_depth: 1024,
            routes: 256,
            defer_wrs: None,
            stats: None,
            log: LogLevel::Warn,
        }
    }
}

/// A configuration the preload refuses (it then changes nothing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// An `MC_ADAPTIVE_CC_*` variable.
    Cc(CcConfigError),
    /// An `MC_RAILYARD_*` variable.
    Var {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is allowed.
        allowed: &'static str,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Cc(e) => write!(f, "congestion control: {e}"),
            ConfigError::Var {
                name,
                value,
                allowed,
            } => write!(f, "{name}={value:?}: allowed {allowed}"),
        }
    }
}

impl std::error::Error for ConfigError {}

fn number(
    get: &impl Fn(&'static str) -> Option<String>,
    name: &'static str,
    lo: u32,
    hi: u32,
    allowed: &'static str,
) -> Result<Option<u32>, ConfigError> {
    let Some(v) = get(name) else { return Ok(None) };
    match v.trim().parse::<u32>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(Some(n)),
        _ => Err(ConfigError::Var {
            name,
            value: v,
            allowed,
        }),
    }
}

impl PreloadConfig {
    /// Reads the configuration through `get` (a variable's value, or
    /// `None` when unset).
    ///
    /// ```
    /// use railyard_preload::config::{ConfigError, PreloadConfig};
    /// let vars = [("MC_ADAPTIVE_CC_MODE", "enforce"), ("MC_RAILYARD_QPS", "64")];
    /// let get = |n: &str| vars.iter().find(|v| v.0 == n).map(|v| v.1.to_string());
    /// let c = PreloadConfig::from_lookup(get).unwrap();
    /// assert_eq!(c.qps, 64);
    /// let bad = |n: &str| (n == "MC_RAILYARD_TOKENS").then(|| "lots".to_string());
    /// assert!(matches!(PreloadConfig::from_lookup(bad), Err(ConfigError::Var { name: "MC_RAILYARD_TOKENS", .. })));
    /// ```
    pub fn from_lookup(get: impl Fn(&'static str) -> Option<String>) -> Result<Self, ConfigError> {
        let d = Self::default();
        let cc = CcConfig::from_lookup(&get).map_err(ConfigError::Cc)?;
        let tokens = number(&get, "MC_RAILYARD_TOKENS", 16, 1 << 24, "16..=16777216")?;
        let qps = number(&get, "MC_RAILYARD_QPS", 1, 65536, "1..=65536")?;
        let qp_depth = number(&get, "MC_RAILYARD_QP_DEPTH", 16, 1 << 16, "16..=65536")?;
        let routes = number(&get, "MC_RAILYARD_ROUTES", 1, 65536, "1..=65536")?;
        let defer_wrs = number(&get, "MC_RAILYARD_DEFER_WRS", 1, 1 << 16, "1..=65536")?;
        let log = match get("MC_RAILYARD_LOG").as_deref().map(str::trim) {
            None => d.log,
            Some("off") => LogLevel::Off,
            Some("warn") => LogLevel::Warn,
            Some("info") => LogLevel::Info,
            Some("debug") => LogLevel::Debug,
            Some(v) => {
                return Err(ConfigError::Var {
                    name: "MC_RAILYARD_LOG",
                    value: v.to_string(),
                    allowed: "off|warn|info|debug",
                })
            }
        };
        Ok(Self {
            cc,
            tokens: tokens.unwrap_or(d.tokens),
            qps: qps.unwrap_or(d.qps),
            qp_depth: qp_depth.unwrap_or(d.qp_depth),
            routes: routes.unwrap_or(d.routes),
            defer_wrs,
            stats: get("MC_RAILYARD_STATS")
                .filter(|s| !s.is_empty())
                .map(PathBuf::from),
            log,
        })
    }

    /// Reads the process environment (a value that is not UTF-8 is
    /// treated as unset).
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|n| std::env::var(n).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_core::cc::Mode;

    fn with(vars: &[(&'static str, &str)]) -> Result<PreloadConfig, ConfigError> {
        let v: Vec<(&'static str, String)> =
            vars.iter().map(|(k, v)| (*k, v.to_string())).collect();
        PreloadConfig::from_lookup(move |n| v.iter().find(|x| x.0 == n).map(|x| x.1.clone()))
    }

    #[test]
    fn defaults_are_cc_off_and_documented_sizes() {
        let c = with(&[]).unwrap();
        assert_eq!(c.cc.mode, Mode::Off);
        assert_eq!(
            (c.tokens, c.qps, c.qp_depth, c.routes),
            (65536, 512, 1024, 256)
        );
        assert_eq!(
            (c.defer_wrs, c.stats.clone(), c.log),
            (None, None, LogLevel::Warn)
        );
    }

    #[test]
    fn every_variable_is_read_and_bad_ones_are_named() {
        let c = with(&[
            ("MC_ADAPTIVE_CC_MODE", "enforce"),
            ("MC_RAILYARD_TOKENS", "4096"),
            ("MC_RAILYARD_QPS", "8"),
            ("MC_RAILYARD_QP_DEPTH", "64"),
            ("MC_RAILYARD_ROUTES", "4"),
            ("MC_RAILYARD_DEFER_WRS", "32"),
            ("MC_RAILYARD_STATS", "/x/stats.json"),
            ("MC_RAILYARD_LOG", "debug"),
        ])
        .unwrap();
        assert_eq!(c.cc.mode, Mode::Enforce);
        assert_eq!((c.tokens, c.qps, c.qp_depth, c.routes), (4096, 8, 64, 4));
        assert_eq!(c.defer_wrs, Some(32));
        assert_eq!(c.stats, Some(PathBuf::from("/x/stats.json")));
        assert_eq!(c.log, LogLevel::Debug);
        for (k, v) in [
            ("MC_RAILYARD_TOKENS", "0"),
            ("MC_RAILYARD_QPS", "-1"),
            ("MC_RAILYARD_QP_DEPTH", "8"),
            ("MC_RAILYARD_ROUTES", "x"),
            ("MC_RAILYARD_DEFER_WRS", "0"),
            ("MC_RAILYARD_LOG", "loud"),
        ] {
            match with(&[(k, v)]) {
                Err(ConfigError::Var { name, .. }) => assert_eq!(name, k),
                other => panic!("{k}={v}: {other:?}"),
            }
        }
        assert!(matches!(
            with(&[("MC_ADAPTIVE_CC_MODE", "fast")]),
            Err(ConfigError::Cc(_))
        ));
    }
}
