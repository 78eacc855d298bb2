//! Architecture support. Only x86-64 exists today; the rest of the VMM
//! reaches the architecture through this module so another one can be added
//! beside it.

pub mod x86_64;
