//! Renders results: terminal tables, CSV, and a self-contained HTML page with inline
//! SVG charts. Every function here is pure: it takes the data of `run.json` and
//! returns text. Nothing here measures, reads files or prints, so `cipherbench report
//! DIR` re-renders without re-measuring, and a rendering bug can never destroy data.

pub mod compare;
pub mod csv;
pub mod file;
pub mod html;
pub mod ladder;
pub mod markdown;
pub mod svg;
pub mod text;
pub mod tls;
pub mod tunnel;

use cipherbench_model::RunRecord;

/// One rendered file: its name in the results directory and its contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// File name (no directory).
    pub name: String,
    /// Contents.
    pub contents: String,
}

/// Every derived file for a record: CSV per layer, `summary.md` and `report.html`.
pub fn render_all(record: &RunRecord) -> Vec<Rendered> {
    let mut files = Vec::new();
    if let Some(speed) = &record.speed {
        files.push(Rendered {
            name: "speed.csv".into(),
            contents: csv::speed(speed),
        });
    }
    if let Some(file) = &record.file {
        files.push(Rendered {
            name: "file.csv".into(),
            contents: file::csv(file),
        });
    }
    if let Some(t) = &record.tls {
        if let Some(sweep) = &t.sweep {
            files.push(Rendered {
                name: "tls.csv".into(),
                contents: tls::csv_sweep(sweep),
            });
        }
        if let Some(ramp) = &t.ramp {
            files.push(Rendered {
                name: "tls-ramp.csv".into(),
                contents: tls::csv_ramp(ramp),
            });
        }
    }
    if let Some(t) = &record.tunnel {
        files.push(Rendered {
            name: "tunnel.csv".into(),
            contents: tunnel::csv(t),
        });
    }
    files.push(Rendered {
        name: "summary.md".into(),
        contents: markdown::summary(record),
    });
    files.push(Rendered {
        name: "report.html".into(),
        contents: html::render(record),
    });
    files
}
