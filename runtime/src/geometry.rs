//! Screen geometry requested for a workspace, validated at the edge.

use serde::{Deserialize, Serialize};

/// The smallest screen XFCE and Chromium are usable on.
pub const MIN: (u32, u32) = (320, 240);
/// The largest screen Cubicle hands out (8K); bigger ones exhaust memory.
pub const MAX: (u32, u32) = (7680, 4320);

/// A screen size in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Geometry {
    pub width: u32,
    pub height: u32,
}

impl Default for Geometry {
    fn default() -> Self {
        Self {
            width: 1280,
            height: 800,
        }
    }
}

/// Why a geometry was refused; the message names the field.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GeometryError {
    #[error("geometry.{field} = {value} is out of range: allowed {min}..={max} pixels")]
    OutOfRange {
        field: &'static str,
        value: u64,
        min: u32,
        max: u32,
    },
    #[error("geometry {0:?} is not WIDTHxHEIGHT (e.g. \"1280x800\")")]
    Malformed(String),
}

impl Geometry {
    /// Checks both sides against [`MIN`] and [`MAX`].
    pub fn validated(width: u64, height: u64) -> Result<Self, GeometryError> {
        let check = |field, value: u64, min: u32, max: u32| {
            if value < u64::from(min) || value > u64::from(max) {
                return Err(GeometryError::OutOfRange {
                    field,
                    value,
                    min,
                    max,
                });
            }
            u32::try_from(value).map_err(|_| GeometryError::OutOfRange {
                field,
                value,
                min,
                max,
            })
        };
        Ok(Self {
            width: check("width", width, MIN.0, MAX.0)?,
            height: check("height", height, MIN.1, MAX.1)?,
        })
    }

    /// Parses `WIDTHxHEIGHT`.
    pub fn parse(text: &str) -> Result<Self, GeometryError> {
        let (w, h) = text
            .split_once('x')
            .and_then(|(w, h)| Some((w.parse().ok()?, h.parse().ok()?)))
            .ok_or_else(|| GeometryError::Malformed(text.to_owned()))?;
        Self::validated(w, h)
    }
}

impl std::fmt::Display for Geometry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}", self.width, self.height)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_out_of_range_and_names_the_field() {
        let err = Geometry::validated(0, 0).unwrap_err();
        assert!(err.to_string().contains("geometry.width"), "{err}");
        let err = Geometry::validated(1280, 100_000).unwrap_err();
        assert!(err.to_string().contains("geometry.height"), "{err}");
        assert!(Geometry::validated(u64::MAX, 800).is_err());
        assert_eq!(
            Geometry::parse("1024x768").unwrap(),
            Geometry {
                width: 1024,
                height: 768
            }
        );
        assert!(matches!(
            Geometry::parse("big"),
            Err(GeometryError::Malformed(_))
        ));
    }
}
