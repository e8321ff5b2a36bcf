//! `openssl speed -evp ... -mr` for a cross-check of our figures against the tool
//! every reader knows. Parsing is a pure function tested on captured output.

use crate::supervisor::{Loader, Spawn};
use anyhow::{bail, Result};
use std::time::Duration;

/// Parses the `+F:` line of `openssl speed -mr`: bytes per second for each size, in
/// the order of the sizes asked. `+F:25:AES-128-GCM:1290035200.00` → `[1.29e9]`.
pub fn parse_mr(output: &str) -> Option<Vec<f64>> {
    let line = output.lines().find(|l| l.starts_with("+F:"))?;
    let fields: Vec<&str> = line.split(':').collect();
    if fields.len() < 4 {
        return None;
    }
    fields[3..]
        .iter()
        .map(|f| f.trim().parse::<f64>().ok())
        .collect()
}

/// The command for one point. `-elapsed` makes openssl count wall time like we do
/// (its default is user CPU time); `-seconds` bounds it.
pub fn command(name: &str, aead: bool, decrypt: bool, size: u64, seconds: u32) -> Vec<String> {
    let mut args = vec![
        "speed".to_string(),
        "-elapsed".into(),
        "-seconds".into(),
        seconds.to_string(),
        "-bytes".into(),
        size.to_string(),
        "-evp".into(),
        name.into(),
    ];
    if aead {
        args.push("-aead".into());
    }
    if decrypt {
        args.push("-decrypt".into());
    }
    args.push("-mr".into());
    args
}

/// Runs `openssl` with `args` under the variant's mask; bytes per second.
pub fn run(
    args: &[String],
    ia32cap: Option<&str>,
    loader: Option<&Loader>,
    seconds: u32,
) -> Result<f64> {
    let out = Spawn::new("openssl")
        .args(args)
        .ia32cap(ia32cap)
        .loader(loader)
        .output(Duration::from_secs(u64::from(seconds) + 30))?
        .success("openssl speed")?;
    match parse_mr(&out.stdout).and_then(|v| v.first().copied()) {
        Some(rate) => Ok(rate),
        None => bail!(
            "could not read a +F: line from `openssl {}`",
            args.join(" ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_captured_output() {
        let aead = include_str!("../../tests/fixtures/openssl-speed-mr-aead.txt");
        assert_eq!(parse_mr(aead), Some(vec![1_290_035_200.0]));
        let des = include_str!("../../tests/fixtures/openssl-speed-mr-des.txt");
        assert_eq!(parse_mr(des), Some(vec![22_708_224.0]));
        assert_eq!(parse_mr("+F:1:x:1.0:2.5\n"), Some(vec![1.0, 2.5]));
    }

    #[test]
    fn rejects_malformed_output() {
        assert_eq!(parse_mr("nothing"), None);
        assert_eq!(parse_mr("+F:25:AES\n"), None);
        assert_eq!(parse_mr("+F:25:AES:abc\n"), None);
    }

    #[test]
    fn builds_like_for_like_commands() {
        let c = command("aes-128-gcm", true, false, 1024, 1);
        assert!(c.contains(&"-aead".to_string()) && c.contains(&"-elapsed".to_string()));
        assert!(!c.contains(&"-decrypt".to_string()));
    }
}
