//! Memory and huge pages of a NUMA node, as the memory manager takes them (discovered by
//! [`sysfs::discover_memory`](crate::sysfs::discover_memory) under the `sysfs` feature).

/// Huge pages of one size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HugePages {
    /// The page size in KiB (2048 for 2 MiB pages).
    pub page_size_kib: u64,
    /// How many pages the node has (`nr_hugepages`).
    pub count: u64,
}

impl HugePages {
    /// The resource name the kubelet gives these pages: `hugepages-2Mi`, `hugepages-1Gi`,
    /// `hugepages-64Ki` (the largest binary unit that divides the size).
    pub fn resource_name(&self) -> String {
        // Saturating: discovery refuses sizes whose bytes overflow (`sysfs::discover_memory`);
        // a hand-built value past 2^64 bytes is named by the largest size there is.
        let bytes = self.page_size_kib.saturating_mul(1024);
        let (value, unit) = [
            (1u64 << 40, "Ti"),
            (1 << 30, "Gi"),
            (1 << 20, "Mi"),
            (1 << 10, "Ki"),
        ]
        .into_iter()
        .find(|(unit, _)| bytes.is_multiple_of(*unit))
        .map_or((bytes, ""), |(size, unit)| (bytes / size, unit));
        format!("hugepages-{value}{unit}")
    }

    /// Bytes in all the pages, saturating at `u64::MAX` (discovery refuses pages whose bytes
    /// overflow, so only a hand-built value saturates; upstream's `uint64` product wraps).
    pub fn bytes(&self) -> u64 {
        self.page_size_kib
            .saturating_mul(1024)
            .saturating_mul(self.count)
    }

    /// [`bytes`](Self::bytes), `None` where the product overflows 64 bits.
    pub fn checked_bytes(&self) -> Option<u64> {
        self.page_size_kib
            .checked_mul(1024)?
            .checked_mul(self.count)
    }
}

/// Memory of one NUMA node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaMemory {
    /// The node's id as the OS numbers it.
    pub node: usize,
    /// Bytes of memory (`MemTotal`).
    pub memory_bytes: u64,
    /// Huge pages by size, smallest first.
    pub huge_pages: Vec<HugePages>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_page_resource_names_are_the_kubelets() {
        let name = |kib| {
            HugePages {
                page_size_kib: kib,
                count: 0,
            }
            .resource_name()
        };
        assert_eq!(name(2048), "hugepages-2Mi");
        assert_eq!(name(1_048_576), "hugepages-1Gi");
        assert_eq!(name(64), "hugepages-64Ki");
        assert_eq!(name(16_777_216), "hugepages-16Gi");
        assert_eq!(name(32_768), "hugepages-32Mi");
    }

    /// Sizes and counts read from sysfs used to overflow `page_size_kib * 1024 * count`
    /// ("attempt to multiply with overflow"); the product saturates, `checked_bytes` says so.
    #[test]
    fn huge_page_bytes_never_overflow() {
        let pages = |page_size_kib, count| HugePages {
            page_size_kib,
            count,
        };
        assert_eq!(pages(2048, 3).bytes(), 3 * 2048 * 1024);
        assert_eq!(pages(2048, 3).checked_bytes(), Some(3 * 2048 * 1024));
        assert_eq!(pages(1 << 54, 1).bytes(), u64::MAX);
        assert_eq!(pages(1 << 54, 1).checked_bytes(), None);
        assert_eq!(pages(2048, u64::MAX).bytes(), u64::MAX);
        assert_eq!(pages(2048, u64::MAX).checked_bytes(), None);
        assert_eq!(pages(u64::MAX, 0).checked_bytes(), None);
        assert_eq!(
            pages(u64::MAX, 0).resource_name(),
            "hugepages-18446744073709551615"
        );
        assert_eq!(
            pages(1 << 54, 0).resource_name(),
            "hugepages-18446744073709551615"
        );
    }
}
