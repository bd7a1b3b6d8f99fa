//! corral-conformance's tests, one binary: every vector file of `testdata/conformance`
//! passes (`vectors`), the `device_hints` suite checks every case of its file
//! (`device_hints`), and files that cannot be run are errors (`errors`).

mod device_hints;
mod errors;
mod support;
mod vectors;
