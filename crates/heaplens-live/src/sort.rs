//! The order of the call-site table: by bytes in use now, by bytes allocated per second, or by
//! bytes allocated in all; a key cycles through them (`s` in the terminal, `--sort` for
//! `--plain`).

/// What the call-site table is sorted by (most first).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Sort {
    /// Bytes of the site's blocks live now.
    #[default]
    InUse,
    /// Bytes the site allocated per second since the previous screen.
    Rate,
    /// Bytes the site allocated since recording started.
    Total,
}

impl Sort {
    /// Every order, in the order the key cycles through them.
    pub const ALL: [Sort; 3] = [Sort::InUse, Sort::Rate, Sort::Total];

    /// The order after this one.
    pub fn next(self) -> Sort {
        match self {
            Sort::InUse => Sort::Rate,
            Sort::Rate => Sort::Total,
            Sort::Total => Sort::InUse,
        }
    }

    /// Its name on the screen.
    pub fn label(self) -> &'static str {
        match self {
            Sort::InUse => "bytes in use now",
            Sort::Rate => "bytes allocated per second",
            Sort::Total => "bytes allocated in all",
        }
    }

    /// Its name on the command line (`--sort`).
    pub fn name(self) -> &'static str {
        match self {
            Sort::InUse => "in-use",
            Sort::Rate => "rate",
            Sort::Total => "total",
        }
    }
}

impl std::str::FromStr for Sort {
    type Err = String;

    /// `in-use`, `rate` or `total`.
    fn from_str(s: &str) -> Result<Sort, String> {
        Sort::ALL.into_iter().find(|o| o.name() == s).ok_or_else(|| format!("{s:?} is not one of in-use, rate, total"))
    }
}

#[cfg(test)]
mod tests {
    use super::Sort;

    #[test]
    fn the_key_cycles_through_every_order_and_names_parse() {
        let mut s = Sort::default();
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(s);
            assert_eq!(s.name().parse::<Sort>(), Ok(s));
            s = s.next();
        }
        assert_eq!(s, Sort::InUse);
        assert_eq!(seen, Sort::ALL);
        assert!("bytes".parse::<Sort>().is_err());
    }
}
