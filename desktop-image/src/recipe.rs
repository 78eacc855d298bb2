//! The recipes, as text the host builds from and keys its caches by: the
//! desktop image's package list and root filesystem script (`recipe/`), and
//! the microVM kernel's config and build script (`kernel/`).
//!
//! They live beside the protocol so that a crate needing a recipe reads it
//! from here, never by a path into another crate's folder.

/// Debian packages of the desktop image, one per line.
pub const PACKAGES: &str = include_str!("../recipe/packages.txt");
/// The script that turns the packages into the image's root filesystem.
pub const BUILD_ROOTFS: &str = include_str!("../recipe/build-rootfs.sh");
/// The microVM guest kernel's configuration (a fragment merged over `make allnoconfig`).
pub const KERNEL_CONFIG: &str = include_str!("../kernel/microvm.config");
/// The script that builds the microVM guest kernel from Debian's `linux-source`.
pub const KERNEL_BUILD: &str = include_str!("../kernel/build.sh");
