//! Which NRI release a runtime speaks, so a plugin subscribes only to events the runtime
//! knows: a runtime refuses a subscription to an event past its own `LAST` ("invalid plugin
//! events") and drops the plugin, so a v0.8 runtime must never be asked for
//! `UPDATE_POD_SANDBOX` or `VALIDATE_CONTAINER_ADJUSTMENT`.
//!
//! A v0.12 runtime names its release in `ConfigureRequest.NRI_version`; an older one sends
//! none, and its release is inferred from its name and version as upstream's stub does it
//! (`api.InferVersionFromRuntime`, pkg/api/version.go at v0.12.2). A runtime neither names
//! nor is known is taken for the oldest: it keeps working, without the newer events.

use super::api::{ConfigureRequest, EventMask};

/// An NRI release: `v0.12.2`; a pre-release or pseudo-version (`v0.9.1-0.2025…`) orders
/// before its release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct NriVersion {
    /// Major.
    pub major: u64,
    /// Minor.
    pub minor: u64,
    /// Patch.
    pub patch: u64,
    /// `false` for a pre-release (a `-` suffix): it orders before the release.
    pub release: bool,
}

impl NriVersion {
    /// The release that added `UPDATE_POD_SANDBOX` and `VALIDATE_CONTAINER_ADJUSTMENT`.
    pub const V0_10_0: NriVersion = NriVersion::new(0, 10, 0);

    /// The release `major.minor.patch`.
    pub const fn new(major: u64, minor: u64, patch: u64) -> Self {
        NriVersion {
            major,
            minor,
            patch,
            release: true,
        }
    }

    /// `v1.2.3` or `1.2.3`, with an optional `-…` (pre-release) or `+…` (build) suffix;
    /// `None` for anything else (`devel`, `unknown`, empty).
    ///
    /// ```
    /// use corral_proto::nri::version::NriVersion;
    ///
    /// assert_eq!(NriVersion::parse("v0.12.2"), Some(NriVersion::new(0, 12, 2)));
    /// assert!(NriVersion::parse("v0.10.0-rc.1").unwrap() < NriVersion::V0_10_0);
    /// assert_eq!(NriVersion::parse("devel"), None);
    /// ```
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.strip_prefix('v').unwrap_or(text);
        let text = text.split_once('+').map_or(text, |(version, _)| version);
        let (core, release) = match text.split_once('-') {
            Some((core, _)) => (core, false),
            None => (text, true),
        };
        let mut parts = core.split('.').map(|part| {
            let digits = !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
            digits.then(|| part.parse::<u64>().ok()).flatten()
        });
        let (major, minor, patch) = (parts.next()??, parts.next()??, parts.next()??);
        if parts.next().is_some() {
            return None;
        }
        Some(NriVersion {
            major,
            minor,
            patch,
            release,
        })
    }

    /// The events a runtime of this release knows: [`EventMask::V0_10`] from v0.10.0 on,
    /// else [`EventMask::V0_8`] (so for a release that is not known either).
    pub fn known_events(version: Option<NriVersion>) -> EventMask {
        match version {
            Some(v) if v >= NriVersion::V0_10_0 => EventMask::V0_10,
            _ => EventMask::V0_8,
        }
    }
}

/// Runtime releases from which a runtime speaks an NRI release, in ascending order: the
/// boundaries of upstream's table (`runtimeVersionMap`, pkg/api/version.go at v0.12.2); a
/// release between two rows speaks the earlier row's NRI, as upstream's closest match.
const CONTAINERD: &[((u64, u64, u64), NriVersion)] = &[
    ((1, 7, 0), NriVersion::new(0, 3, 0)),
    ((1, 7, 7), NriVersion::new(0, 4, 0)),
    ((1, 7, 14), NriVersion::new(0, 6, 0)),
    ((1, 7, 16), NriVersion::new(0, 6, 1)),
    ((1, 7, 26), NriVersion::new(0, 8, 0)),
    ((2, 2, 0), NriVersion::new(0, 10, 0)),
    ((2, 2, 1), NriVersion::new(0, 11, 0)),
];

/// CRI-O's rows, as [`CONTAINERD`]'s (1.33's NRI is a pseudo-version after v0.9.0, before
/// `VALIDATE_CONTAINER_ADJUSTMENT`).
const CRI_O: &[((u64, u64, u64), NriVersion)] = &[
    ((1, 26, 0), NriVersion::new(0, 2, 0)),
    ((1, 26, 2), NriVersion::new(0, 3, 0)),
    ((1, 29, 0), NriVersion::new(0, 5, 0)),
    ((1, 29, 2), NriVersion::new(0, 6, 0)),
    ((1, 31, 0), NriVersion::new(0, 6, 1)),
    ((1, 32, 0), NriVersion::new(0, 9, 0)),
    (
        (1, 33, 0),
        NriVersion {
            release: false,
            ..NriVersion::new(0, 9, 1)
        },
    ),
    ((1, 34, 0), NriVersion::new(0, 10, 0)),
    ((1, 35, 0), NriVersion::new(0, 11, 0)),
];

/// The NRI release the runtime configuring a plugin speaks: its `NRI_version` (v0.12 on),
/// else inferred from `runtime_name` and `runtime_version` (`containerd`, `cri-o`); `None`
/// when neither tells.
///
/// ```
/// use corral_proto::nri::api::ConfigureRequest;
/// use corral_proto::nri::version::{NriVersion, runtime_nri_version};
///
/// let containerd_2_0 = ConfigureRequest {
///     runtime_name: "containerd".into(),
///     runtime_version: "v2.0.5".into(),
///     ..Default::default()
/// };
/// assert_eq!(runtime_nri_version(&containerd_2_0), Some(NriVersion::new(0, 8, 0)));
/// ```
pub fn runtime_nri_version(request: &ConfigureRequest) -> Option<NriVersion> {
    if let Some(named) = NriVersion::parse(&request.nri_version) {
        return Some(named);
    }
    let table = match request.runtime_name.as_str() {
        "containerd" => CONTAINERD,
        "cri-o" => CRI_O,
        _ => return None,
    };
    let runtime = NriVersion::parse(&request.runtime_version)?;
    let key = (runtime.major, runtime.minor, runtime.patch);
    table
        .iter()
        .rev()
        // A pre-release of a row's runtime release is taken for the row before it.
        .find(|(first, _)| *first < key || (*first == key && runtime.release))
        .map(|&(_, nri)| nri)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configure(name: &str, version: &str, nri: &str) -> ConfigureRequest {
        ConfigureRequest {
            runtime_name: name.into(),
            runtime_version: version.into(),
            nri_version: nri.into(),
            ..Default::default()
        }
    }

    /// Rows of upstream's `runtimeVersionMap` (pkg/api/version.go at v0.12.2), and what a
    /// runtime that names its release or is unknown gets.
    #[test]
    fn the_runtimes_release_is_named_or_inferred_as_upstream_infers_it() {
        let cases = [
            (
                ("containerd", "v1.7.13", ""),
                Some(NriVersion::new(0, 4, 0)),
            ),
            (
                ("containerd", "v1.7.30", ""),
                Some(NriVersion::new(0, 8, 0)),
            ),
            (("containerd", "v2.0.0", ""), Some(NriVersion::new(0, 8, 0))),
            (("containerd", "v2.1.6", ""), Some(NriVersion::new(0, 8, 0))),
            (
                ("containerd", "v2.2.0", ""),
                Some(NriVersion::new(0, 10, 0)),
            ),
            (("containerd", "2.2.1", ""), Some(NriVersion::new(0, 11, 0))),
            (
                ("containerd", "v2.3.0", ""),
                Some(NriVersion::new(0, 11, 0)),
            ),
            (
                ("containerd", "v2.2.0-rc.1", ""),
                Some(NriVersion::new(0, 8, 0)),
            ),
            (("containerd", "v1.6.0", ""), None),
            (("cri-o", "1.33.2", ""), NriVersion::parse("v0.9.1-0.2025")),
            (("cri-o", "1.34.0", ""), Some(NriVersion::new(0, 10, 0))),
            (("cri-o", "1.35.0", ""), Some(NriVersion::new(0, 11, 0))),
            (
                ("containerd", "v2.0.0", "v0.12.2"),
                Some(NriVersion::new(0, 12, 2)),
            ),
            (
                ("my-runtime", "9.9.9", "v0.12.0"),
                Some(NriVersion::new(0, 12, 0)),
            ),
            (
                ("containerd", "v2.2.0", "devel"),
                Some(NriVersion::new(0, 10, 0)),
            ),
            (("my-runtime", "9.9.9", ""), None),
            (("", "", ""), None),
        ];
        for ((name, version, nri), want) in cases {
            let got = runtime_nri_version(&configure(name, version, nri));
            assert_eq!(got, want, "{name} {version} {nri:?}");
        }
    }

    #[test]
    fn only_a_v0_10_runtime_or_later_knows_the_new_events() {
        let known = |v: &str| NriVersion::known_events(NriVersion::parse(v));
        assert_eq!(known("v0.8.0"), EventMask::V0_8);
        assert_eq!(
            known("v0.9.1-0.20250219030224-e597e7849f24"),
            EventMask::V0_8
        );
        assert_eq!(known("v0.10.0-rc.1"), EventMask::V0_8);
        assert_eq!(known("v0.10.0"), EventMask::V0_10);
        assert_eq!(known("v0.12.2"), EventMask::V0_10);
        assert_eq!(known("v1.0.0"), EventMask::V0_10);
        assert_eq!(known("unknown"), EventMask::V0_8);
    }

    #[test]
    fn versions_that_are_not_three_numbers_are_not_versions() {
        for text in [
            "", "v", "0.10", "0.10.0.1", "v0.x.0", "v-1.0.0", "v0..0", "devel",
        ] {
            assert_eq!(NriVersion::parse(text), None, "{text:?}");
        }
        assert_eq!(
            NriVersion::parse("v0.12.2+dirty"),
            Some(NriVersion::new(0, 12, 2))
        );
    }
}
