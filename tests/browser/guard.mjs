// A hang guard for the browser scripts: `ms`, or twenty times it inside the
// nested test host (CUBICLE_NESTED), where everything runs under emulation.
// The Rust side's `cubicle_tests::guard` does the same. A bound on waiting,
// never a timing assertion.
export const guard = (ms) => (process.env.CUBICLE_NESTED ? ms * 20 : ms);
