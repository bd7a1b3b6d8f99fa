//! sysfs discovery of the real-machine fixtures in `testdata/sysfs`.

use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};

fn discovery_benches(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/sysfs");
    let mut group = c.benchmark_group("discovery");
    for name in [
        "2arm-2c",
        "16em64t-4s2c2t",
        "48amd64-4pa2n6c-sparse",
        "fakeheteromemtiers",
    ] {
        let dir = root.join(name);
        corral_topology::discover(&dir).expect("fixture discovers");
        group.bench_function(name, |b| b.iter(|| corral_topology::discover(&dir)));
    }
    group.finish();
}

criterion_group!(name = benches; config = Criterion::default().sample_size(10).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1)); targets = discovery_benches);
criterion_main!(benches);
