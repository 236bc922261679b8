//! Builds the C library's long double arithmetic Redis's float increments
//! use (`src/api/resp/long_double.c`).

fn main() {
    println!("cargo::rerun-if-changed=src/api/resp/long_double.c");
    cc::Build::new()
        .file("src/api/resp/long_double.c")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .compile("shoal_long_double");
}
