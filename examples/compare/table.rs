//! The table `compare` prints: each row times the peer and ours alternately in the
//! same process and keeps the median of the runs.

pub struct Bench {
    pub runs: usize,
    pub scale: u64,
    pub min_iters: u64,
    pub rows: Vec<Row>,
}

pub struct Row {
    section: &'static str,
    workload: &'static str,
    peer: &'static str,
    peer_ns: f64,
    ours: &'static str,
    ours_ns: f64,
}

impl Bench {
    /// Times `peer` and `ours` (each runs `iters` operations) alternately, `runs`
    /// times, and records the median ns/op of each.
    pub fn pair(
        &mut self,
        section: &'static str,
        workload: &'static str,
        iters: u64,
        (peer, mut peer_fn): (&'static str, impl FnMut(u64)),
        (ours, mut ours_fn): (&'static str, impl FnMut(u64)),
    ) {
        // Quick mode shortens rows, but never below `min_iters`: a row over a table
        // larger than the cache needs enough touches to measure more than cold misses.
        let iters = (iters / self.scale).max(self.min_iters).min(iters);
        peer_fn(iters / 10); // warm up caches and lazily built state
        ours_fn(iters / 10);
        let (mut peer_runs, mut ours_runs) = (Vec::new(), Vec::new());
        for _ in 0..self.runs {
            peer_runs.push(time_ns(iters, &mut peer_fn));
            ours_runs.push(time_ns(iters, &mut ours_fn));
        }
        self.rows.push(Row {
            section,
            workload,
            peer,
            peer_ns: median(peer_runs),
            ours,
            ours_ns: median(ours_runs),
        });
    }

    pub fn print(&self) {
        let width = |f: fn(&Row) -> &str, title: &str| {
            self.rows
                .iter()
                .map(|r| f(r).chars().count())
                .max()
                .unwrap_or(0)
                .max(title.len())
        };
        let (w, p, o) = (
            width(|r| r.workload, "workload"),
            width(|r| r.peer, "peer"),
            width(|r| r.ours, "ours"),
        );
        println!(
            "ratio = peer ns/op / ours ns/op (above 1: ours is faster); medians of {} runs",
            self.runs
        );
        println!(
            "{:<w$}  {:<p$} {:>8}  {:<o$} {:>8}  {:>7}",
            "workload", "peer", "ns/op", "ours", "ns/op", "ratio"
        );
        // One heading per workload: rows of a section measured at different times
        // (the driver-wake row runs last, on its own runtime) print together.
        let mut sections: Vec<&str> = Vec::new();
        for row in &self.rows {
            if !sections.contains(&row.section) {
                sections.push(row.section);
            }
        }
        let ordered = sections
            .iter()
            .flat_map(|s| self.rows.iter().filter(move |r| r.section == *s));
        let mut section = "";
        for row in ordered {
            crate::common::record(&[
                &"compare_row",
                &row.section,
                &row.workload,
                &row.peer,
                &row.peer_ns,
                &row.ours,
                &row.ours_ns,
            ]);
            if row.section != section {
                section = row.section;
                println!("-- {section}");
            }
            println!(
                "{:<w$}  {:<p$} {:>8.1}  {:<o$} {:>8.1}  {:>6.1}x",
                row.workload,
                row.peer,
                row.peer_ns,
                row.ours,
                row.ours_ns,
                row.peer_ns / row.ours_ns,
            );
        }
    }
}

fn time_ns(iters: u64, f: &mut impl FnMut(u64)) -> f64 {
    let start = std::time::Instant::now();
    f(iters);
    start.elapsed().as_nanos() as f64 / iters as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
