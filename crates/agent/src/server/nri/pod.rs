//! The kubelet's view of a pod and one of its containers, derived from what NRI carries:
//! names and uid from the pod sandbox, the QoS class from the pod's cgroup parent, CPU
//! request and limit back from the cgroup values the kubelet wrote (`cpu.shares` from the
//! request, CFS quota over period from the limit: `pkg/kubelet/cm/helpers_linux.go`'s
//! `MilliCPUToShares` and `MilliCPUToQuota` inverted), the memory limit as is.
//!
//! NRI carries neither the pod spec nor the other containers: each container is seen alone
//! when it is created (see the README's NRI section for the rules this implies).

use corral_proto::nri::api;
use k8s_openapi::api::core::v1::Pod as K8sPod;

/// `MinShares`: what a container without a CPU request gets.
const MIN_SHARES: u64 = 2;
/// `SharesPerCPU`.
const SHARES_PER_CPU: u64 = 1024;
/// `MilliCPUToCPU`.
const MILLI_PER_CPU: u64 = 1000;

/// A pod's QoS class, as its cgroup parent names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QosClass {
    /// `kubepods/pod<uid>` (cgroupfs) or `kubepods-pod<uid>.slice` (systemd).
    Guaranteed,
    /// `kubepods/burstable/…` or `kubepods-burstable-…`.
    Burstable,
    /// `kubepods/besteffort/…` or `kubepods-besteffort-…`.
    BestEffort,
}

/// The QoS class a pod cgroup parent names; one outside `kubepods` is `None` (not a
/// kubelet pod).
pub(crate) fn qos_of_cgroup_parent(parent: &str) -> Option<QosClass> {
    if !parent.contains("kubepods") {
        return None;
    }
    Some(if parent.contains("besteffort") {
        QosClass::BestEffort
    } else if parent.contains("burstable") {
        QosClass::Burstable
    } else {
        QosClass::Guaranteed
    })
}

/// The QoS class of a pod that names no cgroup parent, from its container's own values, by
/// the kubelet's rule applied to that container: Guaranteed when it has a CPU request, a
/// CPU limit equal to it and a memory limit; BestEffort when it has none of them; else
/// Burstable.
pub(crate) fn qos_of_container(
    shares: u64,
    quota: i64,
    period: u64,
    memory: Option<i64>,
) -> QosClass {
    let request = cpu_request_millis(shares);
    let limit = cpu_limit_millis(quota, period);
    if request > 0 && limit == Some(request) && memory.is_some() {
        QosClass::Guaranteed
    } else if request == 0 && limit.is_none() && memory.is_none() {
        QosClass::BestEffort
    } else {
        QosClass::Burstable
    }
}

/// The CPU request, in millicores, the kubelet's `cpu.shares` came from: the smallest
/// request `MilliCPUToShares` maps to `shares` (shares of 2 or less: no request).
///
/// The runtime sends any `u64` (the kubelet writes at most `MaxShares`, 262144): the product
/// is taken in 128 bits, where `shares * 1000` overflowed `u64`, and always fits back.
pub(crate) fn cpu_request_millis(shares: u64) -> u64 {
    if shares <= MIN_SHARES {
        return 0;
    }
    millis_over(shares, SHARES_PER_CPU)
}

/// The CPU limit, in millicores, `MilliCPUToQuota` gave `quota` over `period` from; no
/// quota (0 or negative) is no limit. Any quota and period the runtime sends convert (in
/// 128 bits; a limit past `u64::MAX` millicores saturates, and no manifest takes it).
pub(crate) fn cpu_limit_millis(quota: i64, period: u64) -> Option<u64> {
    let quota = u64::try_from(quota).ok().filter(|&q| q > 0)?;
    (period > 0).then(|| millis_over(quota, period))
}

/// `ceil(value * 1000 / per)` (`per > 0`), exact, saturating at `u64::MAX`.
fn millis_over(value: u64, per: u64) -> u64 {
    let millis = (u128::from(value) * u128::from(MILLI_PER_CPU)).div_ceil(u128::from(per));
    u64::try_from(millis).unwrap_or(u64::MAX)
}

/// Why a container cannot be seen as a kubelet container.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NriPodError {
    /// The pod sandbox or container is missing a field the conversion needs.
    #[error("the NRI {what} has no {field}")]
    Missing {
        /// `pod` or `container`.
        what: &'static str,
        /// The field.
        field: &'static str,
    },
    /// The pod is not a kubelet pod (its cgroup parent is outside `kubepods`).
    #[error("pod {pod} is not a kubelet pod (cgroup parent {parent:?})")]
    NotKubelet {
        /// `namespace/name`.
        pod: String,
        /// Its cgroup parent.
        parent: String,
    },
}

/// A one-container pod manifest of `container` in `pod`, and its pod's QoS class: a Guaranteed pod's container has
/// limits equal to its requests; a Burstable or BestEffort one has requests only, so no
/// decision can treat it as Guaranteed.
pub(crate) fn container_manifest(
    pod: &api::PodSandbox,
    container: &api::Container,
) -> Result<(K8sPod, QosClass), NriPodError> {
    let missing = |what, field| NriPodError::Missing { what, field };
    if pod.uid.is_empty() {
        return Err(missing("pod", "uid"));
    }
    if container.name.is_empty() {
        return Err(missing("container", "name"));
    }
    let parent = pod
        .linux
        .as_ref()
        .map(|l| l.cgroup_parent.as_str())
        .unwrap_or_default();
    let resources = container.linux.as_ref().and_then(|l| l.resources.as_ref());
    let cpu = resources.and_then(|r| r.cpu.as_ref());
    let shares = cpu.and_then(|c| c.shares.as_ref()).map_or(0, |s| s.value);
    let quota = cpu.and_then(|c| c.quota.as_ref()).map_or(0, |q| q.value);
    let period = cpu.and_then(|c| c.period.as_ref()).map_or(0, |p| p.value);
    let memory = resources
        .and_then(|r| r.memory.as_ref())
        .and_then(|m| m.limit.as_ref())
        .map(|l| l.value)
        .filter(|&l| l > 0);
    let qos = if parent.is_empty() {
        qos_of_container(shares, quota, period, memory)
    } else {
        qos_of_cgroup_parent(parent).ok_or_else(|| NriPodError::NotKubelet {
            pod: format!("{}/{}", pod.namespace, pod.name),
            parent: parent.to_owned(),
        })?
    };
    let request = cpu_request_millis(shares);
    let mut requests = serde_json::Map::new();
    if request > 0 {
        requests.insert("cpu".into(), format!("{request}m").into());
    }
    if let Some(memory) = memory {
        requests.insert("memory".into(), memory.to_string().into());
    }
    for limit in resources.iter().flat_map(|r| &r.hugepage_limits) {
        if let Some(name) = huge_page_resource(&limit.page_size).filter(|_| limit.limit > 0) {
            requests.insert(name, limit.limit.to_string().into());
        }
    }
    let mut resources = serde_json::json!({ "requests": requests });
    if qos == QosClass::Guaranteed {
        let limit = cpu_limit_millis(quota, period).unwrap_or(request);
        let mut limits = requests.clone();
        limits.insert("cpu".into(), format!("{limit}m").into());
        resources["limits"] = limits.into();
    }
    // The API server defaults an empty namespace to "default".
    let namespace = if pod.namespace.is_empty() {
        "default"
    } else {
        &pod.namespace
    };
    let manifest = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": namespace, "uid": pod.uid},
        "spec": {"containers": [{"name": container.name, "resources": resources}]},
    });
    let manifest =
        serde_json::from_value(manifest).expect("a pod manifest built from its own fields");
    Ok((manifest, qos))
}

/// Whether `after` (an `UpdatePodSandbox`'s pod resources) sets other CPU, memory or huge
/// page values for the pod than `before` (the pod's resources as the runtime had them),
/// which only a pod resize does; a pod whose earlier resources the runtime did not send
/// counts as resized (the kubelet updates a pod's resources only to resize it).
pub(crate) fn pod_resized(
    before: Option<&api::LinuxResources>,
    after: &api::LinuxResources,
) -> bool {
    let Some(before) = before else {
        return true;
    };
    type Values = (
        Option<u64>,
        Option<i64>,
        Option<u64>,
        Option<i64>,
        Vec<(String, u64)>,
    );
    let values = |r: &api::LinuxResources| -> Values {
        let cpu = r.cpu.as_ref();
        let mut huge_pages: Vec<(String, u64)> = r
            .hugepage_limits
            .iter()
            .map(|l| (l.page_size.clone(), l.limit))
            .collect();
        huge_pages.sort();
        (
            cpu.and_then(|c| c.shares.as_ref()).map(|v| v.value),
            cpu.and_then(|c| c.quota.as_ref()).map(|v| v.value),
            cpu.and_then(|c| c.period.as_ref()).map(|v| v.value),
            r.memory
                .as_ref()
                .and_then(|m| m.limit.as_ref())
                .map(|v| v.value),
            huge_pages,
        )
    };
    values(before) != values(after)
}

/// The kubelet's resource name of a huge page size as the runtime spells it (`2MB`,
/// `1GB`, `64KB`: binary units, the kubelet's `HugePageUnitSizeFromByteSize`):
/// `hugepages-2Mi`, `hugepages-1Gi`, `hugepages-64Ki`.
fn huge_page_resource(page_size: &str) -> Option<String> {
    let split = page_size.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = page_size.split_at(split);
    let shift = match unit {
        "KB" => 0,
        "MB" => 10,
        "GB" => 20,
        "TB" => 30,
        "PB" => 40,
        _ => return None,
    };
    let page_size_kib = number.parse::<u64>().ok()?.checked_mul(1 << shift)?;
    // A size whose bytes overflow 64 bits names no resource (its name overflowed).
    page_size_kib.checked_mul(1024)?;
    let pages = corral_topology::memory::HugePages {
        page_size_kib,
        count: 0,
    };
    Some(pages.resource_name())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `MilliCPUToShares` (helpers_linux.go), to check the inversion against.
    fn milli_cpu_to_shares(milli: u64) -> u64 {
        if milli == 0 {
            return MIN_SHARES;
        }
        (milli * SHARES_PER_CPU / MILLI_PER_CPU).clamp(MIN_SHARES, 262_144)
    }

    /// `MilliCPUToQuota` (helpers_linux.go).
    fn milli_cpu_to_quota(milli: u64, period: u64) -> i64 {
        if milli == 0 {
            return 0;
        }
        ((milli * period / MILLI_PER_CPU) as i64).max(1000)
    }

    #[test]
    fn the_kubelets_cpu_values_invert_to_the_request_and_limit() {
        for milli in [
            3, 10, 100, 250, 333, 500, 999, 1000, 1500, 2000, 3500, 64_000,
        ] {
            assert_eq!(
                cpu_request_millis(milli_cpu_to_shares(milli)),
                milli,
                "{milli}m"
            );
            // Below 10m the kubelet's quota floor (1,000 µs per 100 ms) reads as 10m.
            let quota = milli_cpu_to_quota(milli, 100_000);
            assert_eq!(
                cpu_limit_millis(quota, 100_000),
                Some(milli.max(10)),
                "{milli}m"
            );
        }
        assert_eq!(cpu_request_millis(milli_cpu_to_shares(0)), 0);
        assert_eq!(cpu_limit_millis(-1, 100_000), None);
        assert_eq!(cpu_limit_millis(0, 100_000), None);
    }

    /// Shares, quotas and periods the kubelet never writes, as a runtime may send them:
    /// `shares * 1000` and `quota * 1000` used to overflow ("attempt to multiply with
    /// overflow"); they convert exactly, or saturate where the millicores exceed `u64`.
    #[test]
    fn any_cpu_values_a_runtime_sends_convert_without_overflow() {
        assert_eq!(cpu_request_millis(u64::MAX), 18_014_398_509_481_984_000);
        assert_eq!(cpu_request_millis(1 << 62), 4_503_599_627_370_496_000);
        assert_eq!(cpu_limit_millis(i64::MAX, 1), Some(u64::MAX));
        assert_eq!(cpu_limit_millis(i64::MAX, u64::MAX), Some(500));
        assert_eq!(
            cpu_limit_millis(i64::MAX, 100_000),
            Some(92_233_720_368_547_759)
        );
        assert_eq!(
            qos_of_container(u64::MAX, i64::MAX, 1, Some(1)),
            QosClass::Burstable
        );
    }

    #[test]
    fn without_a_cgroup_parent_the_container_decides_its_class() {
        let period = 100_000;
        let (two, half) = (milli_cpu_to_shares(2000), milli_cpu_to_shares(500));
        let quota_two = milli_cpu_to_quota(2000, period);
        let mem = Some(64 << 20);
        assert_eq!(
            qos_of_container(two, quota_two, period, mem),
            QosClass::Guaranteed
        );
        assert_eq!(
            qos_of_container(two, quota_two, period, None),
            QosClass::Burstable
        );
        assert_eq!(
            qos_of_container(half, quota_two, period, mem),
            QosClass::Burstable
        );
        assert_eq!(qos_of_container(half, 0, period, None), QosClass::Burstable);
        assert_eq!(qos_of_container(2, 0, period, None), QosClass::BestEffort);
    }

    #[test]
    fn huge_page_sizes_name_the_kubelets_resources() {
        assert_eq!(huge_page_resource("2MB").as_deref(), Some("hugepages-2Mi"));
        assert_eq!(huge_page_resource("1GB").as_deref(), Some("hugepages-1Gi"));
        assert_eq!(
            huge_page_resource("64KB").as_deref(),
            Some("hugepages-64Ki")
        );
        // 2^54 KiB is 2^64 bytes: its name overflowed `size * 1024` before.
        for bad in [
            "",
            "MB",
            "2",
            "2mb",
            "99999999999999999999PB",
            "18014398509481984KB",
            "17592186044416MB",
        ] {
            assert_eq!(huge_page_resource(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn cgroup_parents_name_the_qos_class() {
        for (parent, qos) in [
            ("/kubepods/pod1234", Some(QosClass::Guaranteed)),
            ("/kubepods/burstable/pod1234", Some(QosClass::Burstable)),
            ("/kubepods/besteffort/pod1234", Some(QosClass::BestEffort)),
            ("kubepods-pod1234.slice", Some(QosClass::Guaranteed)),
            (
                "kubepods-burstable-pod1234.slice",
                Some(QosClass::Burstable),
            ),
            (
                "kubepods-besteffort-pod1234.slice",
                Some(QosClass::BestEffort),
            ),
            ("/system.slice/other", None),
        ] {
            assert_eq!(qos_of_cgroup_parent(parent), qos, "{parent}");
        }
    }
}
