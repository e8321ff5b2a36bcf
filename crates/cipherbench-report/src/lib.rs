//! Renders results: terminal tables, CSV, and a self-contained HTML page with inline
//! SVG charts. Every function here is pure: it takes the data of `run.json` and
//! returns text. Nothing here measures, reads files or prints, so `cipherbench report
//! DIR` re-renders without re-measuring, and a rendering bug can never destroy data.

#![forbid(unsafe_code)]

pub mod compare;
pub mod csv;
pub mod cycles;
pub mod file;
pub mod gate;
pub mod handshake;
pub mod html;
pub mod keystore;
pub mod ladder;
pub mod machine;
pub mod markdown;
pub mod pk;
pub mod strongswan;
pub mod svg;
pub mod text;
pub mod tls;
pub mod tunnel;
pub mod variants;

use cipherbench_model::RunRecord;

/// `a / b` when both are known and `b` is positive.
pub(crate) fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// One rendered file: its name in the results directory and its contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// File name (no directory).
    pub name: String,
    /// Contents.
    pub contents: String,
}

/// Every derived file for a record: [`render_csv`], then [`render_documents`].
pub fn render_all(record: &RunRecord) -> Vec<Rendered> {
    let mut files = render_csv(record);
    files.extend(render_documents(record));
    files
}

/// The CSV file of each layer the record has: cheap, written after every scenario.
pub fn render_csv(record: &RunRecord) -> Vec<Rendered> {
    let mut files = Vec::new();
    let mut add = |name: &str, contents: String| {
        files.push(Rendered {
            name: name.into(),
            contents,
        })
    };
    if let Some(speed) = &record.speed {
        add("speed.csv", csv::speed(speed));
    }
    if let Some(file) = &record.file {
        add("file.csv", file::csv(file));
    }
    if let Some(t) = &record.tls {
        if let Some(sweep) = &t.sweep {
            add("tls.csv", tls::csv_sweep(sweep));
        }
        if let Some(ramp) = &t.ramp {
            add("tls-ramp.csv", tls::csv_ramp(ramp));
        }
    }
    if let Some(t) = &record.tunnel {
        add("tunnel.csv", tunnel::csv(t));
        if let Some(s) = &t.strongswan {
            add("tunnel-strongswan.csv", strongswan::csv(s));
        }
    }
    files
}

/// `summary.md` and `report.html`: rendered once, when a run ends.
pub fn render_documents(record: &RunRecord) -> Vec<Rendered> {
    vec![
        Rendered {
            name: "summary.md".into(),
            contents: markdown::summary(record),
        },
        Rendered {
            name: "report.html".into(),
            contents: html::render(record),
        },
    ]
}

/// What a rehearsal's figures are (`run --rehearse`), said wherever one is shown.
pub const REHEARSAL: &str = "every part of the preset's plan ran, at the tiny preset's \
lengths (seconds per point, files and responses of at most 4 MiB). It shows the machine \
can run the preset; its figures are not the preset's and are not for quoting.";
