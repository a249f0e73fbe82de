//! Aligned text tables in the style of `kubectl get`: upper-case headers, columns padded to
//! their widest cell and separated by three spaces, no trailing spaces. Also the short ages
//! (`45s`, `3m`, `2h`, `4d`) of the tables. Pure formatting; no I/O.

/// A table under construction.
#[derive(Debug, Clone)]
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers (upper-cased).
    pub fn new(headers: &[&str]) -> Self {
        Table {
            rows: vec![headers.iter().map(|h| h.to_uppercase()).collect()],
        }
    }

    /// Adds a row; missing cells are empty, extra cells are kept.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as text, one line per row, each ending in a newline.
    pub fn render(&self) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .map(|r| r.get(c).map_or(0, |cell| cell.chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::new();
            for (c, width) in widths.iter().enumerate() {
                let cell = row.get(c).map_or("", String::as_str);
                line.push_str(cell);
                if c + 1 < columns {
                    let pad = width - cell.chars().count() + 3;
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// How long ago `then_ms` was at `now_ms`, in the largest whole unit (`45s`, `3m`, `2h`, `4d`).
pub fn age(now_ms: u64, then_ms: u64) -> String {
    let seconds = now_ms.saturating_sub(then_ms) / 1000;
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 2 * 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// The current time in unix milliseconds.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A list as `a,b,c`, or `<none>` when empty.
pub fn list(items: &[String]) -> String {
    if items.is_empty() {
        "<none>".to_owned()
    } else {
        items.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_to_the_widest_cell_without_trailing_spaces() {
        let mut table = Table::new(&["name", "total"]);
        table.row(vec!["node-a".into(), "8".into()]);
        table.row(vec!["n".into(), "16".into()]);
        assert_eq!(table.render(), "NAME     TOTAL\nnode-a   8\nn        16\n");
    }

    #[test]
    fn ages_use_the_largest_whole_unit() {
        assert_eq!(age(10_000, 5_000), "5s");
        assert_eq!(age(200_000, 0), "3m");
        assert_eq!(age(3 * 3_600_000, 0), "3h");
        assert_eq!(age(5 * 86_400_000, 0), "5d");
        assert_eq!(age(0, 5_000), "0s");
    }
}
