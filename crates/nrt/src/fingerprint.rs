//! The pod fingerprint: a short string naming the set of pods a node's NodeResourceTopology
//! accounts for, byte-identical to `k8stopologyawareschedwg/podfingerprint` (v0.2.2, algorithm
//! `pfp0v001`), which the scheduler plugin uses to recompute it from the pods it has bound to the
//! node (scheduler-plugins' `pkg/noderesourcetopology/cache`, `checkPodFingerprintForNode`).
//! Only when the two agree does the plugin drop its own pessimistic accounting of the pods it
//! placed there since and trust the object's `available` numbers again.
//!
//! The algorithm, as upstream's `podfingerprint.go` does it:
//! 1. each pod is one 64-bit xxHash (XXH64): of its name, seeded with the XXH64 (seed 0) of
//!    its namespace — the pair is identified by namespace and name only, no uid, no node name;
//! 2. the pods' hashes are sorted as unsigned integers (so the input order does not matter;
//!    a pod added twice counts twice);
//! 3. the sorted hashes, each as 8 little-endian bytes, are hashed once more with XXH64, seed 0;
//! 4. the signature is `pfp0` (prefix) `v001` (version) and that digest as 16 lower-case
//!    hexadecimal digits, most significant first: 24 ASCII characters in all.
//!
//! The vectors in `testdata/podfingerprint.json` were produced by running upstream's Go code.
//! They record one upstream defect corral does not copy: podfingerprint's hash library
//! (`OneOfOne/xxhash` v1.2.8) has two backends, and its portable one (`-tags safe`, and the
//! only one on ppc64le, s390x and mips) signs a set of 4, 8, 12, … pods — a multiple of 32
//! bytes fed to its streaming hash — differently from the reference XXH64. corral signs as the
//! reference and as the backend upstream builds on amd64 and arm64.

use std::hash::Hasher as _;

use twox_hash::XxHash64;

/// The first four characters of every fingerprint.
pub const FINGERPRINT_PREFIX: &str = "pfp0";
/// The algorithm's version, the four characters after [`FINGERPRINT_PREFIX`]. Upstream's
/// `Check` refuses a fingerprint of any other version.
pub const FINGERPRINT_VERSION: &str = "v001";
/// The annotation older exporters put the fingerprint in; the scheduler plugin reads it only
/// when the object has no [`ATTRIBUTE_FINGERPRINT`](crate::ATTRIBUTE_FINGERPRINT) attribute.
pub const FINGERPRINT_ANNOTATION: &str = "topology.node.k8s.io/fingerprint";
/// Value of the method attribute: the fingerprint covers every pod on the node.
pub const METHOD_ALL: &str = "all";
/// Value of the method attribute: the fingerprint covers only the pods that hold exclusive
/// resources (as scheduler-plugins' `resourcerequests.AreExclusiveForPod` decides).
pub const METHOD_WITH_EXCLUSIVE_RESOURCES: &str = "with-exclusive-resources";

/// Which pods a fingerprint covers: the value of the top-level attribute
/// [`ATTRIBUTE_FINGERPRINT_METHOD`](crate::ATTRIBUTE_FINGERPRINT_METHOD).
///
/// The scheduler plugin (in its default `Autodetect` resync mode) counts only the running pods
/// it has bound to the node, and of those only the ones with exclusive resources when the
/// attribute says [`METHOD_WITH_EXCLUSIVE_RESOURCES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FingerprintMethod {
    /// [`METHOD_ALL`].
    All,
    /// [`METHOD_WITH_EXCLUSIVE_RESOURCES`].
    WithExclusiveResources,
}

impl FingerprintMethod {
    /// The attribute value naming this method.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::All => METHOD_ALL,
            Self::WithExclusiveResources => METHOD_WITH_EXCLUSIVE_RESOURCES,
        }
    }

    /// The method the scheduler plugin assumes for an object whose method attribute is
    /// `value` (`None`: no such attribute): only the exact [`METHOD_WITH_EXCLUSIVE_RESOURCES`]
    /// selects it, anything else — missing, unknown, other case — means [`Self::All`]
    /// (`podFingerprintForNodeTopology`, scheduler-plugins).
    pub fn as_scheduler_reads(value: Option<&str>) -> Self {
        match value {
            Some(METHOD_WITH_EXCLUSIVE_RESOURCES) => Self::WithExclusiveResources,
            _ => Self::All,
        }
    }
}

/// Why a fingerprint does not check against a set of pods, as upstream's `Check` decides.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FingerprintError {
    /// Shorter than 16 bytes, or not starting with [`FINGERPRINT_PREFIX`]
    /// (upstream's `ErrMalformed`).
    #[error("malformed pod fingerprint")]
    Malformed,
    /// Another version than [`FINGERPRINT_VERSION`] (upstream's `ErrIncompatibleVersion`).
    #[error("pod fingerprint version {version:?} is not {FINGERPRINT_VERSION}")]
    IncompatibleVersion {
        /// Bytes 4 to 8 of the fingerprint (lossily decoded).
        version: String,
    },
    /// Well formed, but of another set of pods (upstream's `ErrSignatureMismatch`).
    #[error("pod fingerprint mismatch: the pods give {computed}, the fingerprint says {given}")]
    Mismatch {
        /// The digits the pods give.
        computed: String,
        /// The digits of the fingerprint checked.
        given: String,
    },
}

/// The fingerprint of a set of pods, each named by namespace and name, added in any order.
///
/// # Example
///
/// ```
/// use corral_nrt::PodFingerprint;
///
/// let mut fingerprint = PodFingerprint::new();
/// fingerprint.add("ns3", "n2").add("ns1", "n1").add("ns2", "n1");
/// fingerprint.extend([("ns1", "n2"), ("ns3", "n1")]);
/// // upstream's TestTraceStatusJSON: the same five pods, in another order
/// assert_eq!(fingerprint.sign(), "pfp0v001b92008c14168b3a6");
/// assert!(fingerprint.check("pfp0v001b92008c14168b3a6").is_ok());
///
/// assert_eq!(PodFingerprint::new().sign(), "pfp0v001ef46db3751d8e999");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodFingerprint {
    /// One hash per pod added, in the order added.
    hashes: Vec<u64>,
}

impl PodFingerprint {
    /// The fingerprint of no pod.
    pub fn new() -> Self {
        Self::default()
    }

    /// The fingerprint of no pod, with room for `pods` pods.
    pub fn with_capacity(pods: usize) -> Self {
        Self {
            hashes: Vec::with_capacity(pods),
        }
    }

    /// Adds the pod `namespace`/`name`. Adding a pod twice counts it twice, as upstream does.
    pub fn add(&mut self, namespace: &str, name: &str) -> &mut Self {
        let seed = XxHash64::oneshot(0, namespace.as_bytes());
        self.hashes.push(XxHash64::oneshot(seed, name.as_bytes()));
        self
    }

    /// How many pods were added.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// Whether no pod was added.
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// The digest of the pods added so far (upstream's `Sum`, as an integer: its bytes are this
    /// number's, most significant first).
    pub fn digest(&self) -> u64 {
        let mut sorted = self.hashes.clone();
        sorted.sort_unstable();
        let mut hasher = XxHash64::with_seed(0);
        for hash in sorted {
            hasher.write(&hash.to_le_bytes());
        }
        hasher.finish()
    }

    /// The fingerprint of the pods added so far: the value of the attribute
    /// [`ATTRIBUTE_FINGERPRINT`](crate::ATTRIBUTE_FINGERPRINT) (upstream's `Sign`).
    pub fn sign(&self) -> String {
        format!(
            "{FINGERPRINT_PREFIX}{FINGERPRINT_VERSION}{:016x}",
            self.digest()
        )
    }

    /// Whether `fingerprint` is the fingerprint of the pods added so far, decided as upstream's
    /// `Check` (which the scheduler plugin calls): by bytes, the digits compared exactly
    /// (upper-case digits do not match).
    pub fn check(&self, fingerprint: &str) -> Result<(), FingerprintError> {
        let bytes = fingerprint.as_bytes();
        let (prefix, version) = (FINGERPRINT_PREFIX.len(), FINGERPRINT_VERSION.len());
        // upstream: prefix, version and at least 8 digits
        if bytes.len() < prefix + version + 8 || &bytes[..prefix] != FINGERPRINT_PREFIX.as_bytes() {
            return Err(FingerprintError::Malformed);
        }
        let found = &bytes[prefix..prefix + version];
        if found != FINGERPRINT_VERSION.as_bytes() {
            return Err(FingerprintError::IncompatibleVersion {
                version: String::from_utf8_lossy(found).into_owned(),
            });
        }
        let computed = format!("{:016x}", self.digest());
        let given = &bytes[prefix + version..];
        if given != computed.as_bytes() {
            return Err(FingerprintError::Mismatch {
                computed,
                given: String::from_utf8_lossy(given).into_owned(),
            });
        }
        Ok(())
    }
}

impl<N: AsRef<str>, M: AsRef<str>> Extend<(N, M)> for PodFingerprint {
    fn extend<I: IntoIterator<Item = (N, M)>>(&mut self, pods: I) {
        for (namespace, name) in pods {
            self.add(namespace.as_ref(), name.as_ref());
        }
    }
}

impl<N: AsRef<str>, M: AsRef<str>> FromIterator<(N, M)> for PodFingerprint {
    fn from_iter<I: IntoIterator<Item = (N, M)>>(pods: I) -> Self {
        let mut fingerprint = Self::new();
        fingerprint.extend(pods);
        fingerprint
    }
}

#[cfg(test)]
mod tests;
