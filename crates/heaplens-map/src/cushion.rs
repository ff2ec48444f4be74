//! Shaded cushions (Moreta & Telea, section 4.1.1): a luminance profile across a block, dark at
//! its border and bright inside, so that neighbouring blocks of one colour are told apart.

/// The luminance profile of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cushion {
    /// Flat shading.
    None,
    /// Bright in the middle 60%, falling off linearly to 55% at the edges (beveled).
    Plateau,
    /// `1 - (2u - 1)^2`, from 45% at the edges to 100% in the middle: more contrast.
    Parabolic,
}

impl Cushion {
    /// The luminance (0..=1) at `u`, the position across the block (0 and 1 are its edges).
    pub fn at(self, u: f32) -> f32 {
        let u = u.clamp(0.0, 1.0);
        match self {
            Cushion::None => 1.0,
            Cushion::Plateau => {
                let edge = u.min(1.0 - u);
                if edge >= 0.2 {
                    1.0
                } else {
                    0.55 + 0.45 * edge / 0.2
                }
            }
            Cushion::Parabolic => 0.45 + 0.55 * 4.0 * u * (1.0 - u),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Cushion;

    #[test]
    fn profiles() {
        assert_eq!(Cushion::None.at(0.0), 1.0);
        assert_eq!(Cushion::Plateau.at(0.5), 1.0);
        assert!((Cushion::Plateau.at(0.0) - 0.55).abs() < 1e-6);
        assert!((Cushion::Parabolic.at(0.5) - 1.0).abs() < 1e-6);
        assert!((Cushion::Parabolic.at(1.0) - 0.45).abs() < 1e-6);
    }
}
