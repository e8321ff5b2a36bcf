//! Crypto offload devices on the PCI bus: Intel QuickAssist (QAT) physical and
//! virtual functions, and other crypto engines recognised by their driver.

use cipherbench_model::env::OffloadDevice;
use std::path::Path;

/// Intel QAT device ids (vendor 0x8086), from the Linux `qat_*` drivers' tables.
const QAT_IDS: &[(u16, &str)] = &[
    (0x0435, "Intel QAT DH895xCC (PF)"),
    (0x0443, "Intel QAT DH895xCC (VF)"),
    (0x37c8, "Intel QAT C62x (PF)"),
    (0x37c9, "Intel QAT C62x (VF)"),
    (0x19e2, "Intel QAT C3xxx (PF)"),
    (0x19e3, "Intel QAT C3xxx (VF)"),
    (0x18ee, "Intel QAT 200xx (PF)"),
    (0x18ef, "Intel QAT 200xx (VF)"),
    (0x18a0, "Intel QAT C4xxx (PF)"),
    (0x18a1, "Intel QAT C4xxx (VF)"),
    (0x4940, "Intel QAT 4xxx (PF)"),
    (0x4941, "Intel QAT 4xxx (VF)"),
    (0x4942, "Intel QAT 401xx (PF)"),
    (0x4943, "Intel QAT 401xx (VF)"),
    (0x4944, "Intel QAT 402xx (PF)"),
    (0x4945, "Intel QAT 402xx (VF)"),
    (0x4946, "Intel QAT 420xx (PF)"),
    (0x4947, "Intel QAT 420xx (VF)"),
];

/// Drivers of other crypto engines.
const CRYPTO_DRIVERS: &[(&str, &str)] = &[
    ("ccp", "AMD Cryptographic Coprocessor"),
    ("n5pf", "Cavium NITROX"),
    ("nitrox", "Cavium NITROX"),
    ("hisi_sec2", "HiSilicon SEC2"),
    ("hisi_zip", "HiSilicon ZIP"),
];

/// Names a device if it is a crypto offload engine.
pub fn classify(vendor: u16, device: u16, driver: Option<&str>) -> Option<String> {
    if vendor == 0x8086 {
        if let Some((_, name)) = QAT_IDS.iter().find(|(id, _)| *id == device) {
            return Some((*name).to_string());
        }
    }
    let driver = driver?;
    if driver.starts_with("qat_") || driver.starts_with("4xxx") {
        return Some(format!("Intel QAT ({driver})"));
    }
    CRYPTO_DRIVERS
        .iter()
        .find(|(d, _)| driver == *d)
        .map(|(_, name)| (*name).to_string())
}

/// Scans `/sys/bus/pci/devices` (or another root, for tests).
pub fn scan(root: &Path) -> Vec<OffloadDevice> {
    let Ok(dir) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in dir.flatten() {
        let path = entry.path();
        let read_id = |file: &str| {
            std::fs::read_to_string(path.join(file))
                .ok()
                .and_then(|s| u16::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok())
        };
        let (Some(vendor), Some(device)) = (read_id("vendor"), read_id("device")) else {
            continue;
        };
        let driver = std::fs::read_link(path.join("driver"))
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
        if let Some(description) = classify(vendor, device, driver.as_deref()) {
            found.push(OffloadDevice {
                address: entry.file_name().to_string_lossy().into_owned(),
                description,
                id: format!("{vendor:04x}:{device:04x}"),
                driver,
            });
        }
    }
    found.sort_by(|a, b| a.address.cmp(&b.address));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_qat_and_other_engines() {
        assert_eq!(
            classify(0x8086, 0x37c8, Some("c6xx")).as_deref(),
            Some("Intel QAT C62x (PF)")
        );
        assert_eq!(
            classify(0x8086, 0x4941, None).as_deref(),
            Some("Intel QAT 4xxx (VF)")
        );
        assert_eq!(
            classify(0x1022, 0x1468, Some("ccp")).as_deref(),
            Some("AMD Cryptographic Coprocessor")
        );
        assert_eq!(classify(0x8086, 0x1237, None), None);
        assert_eq!(classify(0x1af4, 0x1000, Some("virtio-pci")), None);
    }

    #[test]
    fn scans_a_sysfs_tree() {
        let root = std::env::temp_dir().join(format!("cb-pci-{}", std::process::id()));
        let qat = root.join("0000:3d:00.0");
        let nic = root.join("0000:00:03.0");
        for (dir, vendor, device) in [(&qat, "0x8086", "0x37c8"), (&nic, "0x1af4", "0x1000")] {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join("vendor"), format!("{vendor}\n")).unwrap();
            std::fs::write(dir.join("device"), format!("{device}\n")).unwrap();
        }
        std::os::unix::fs::symlink("/sys/bus/pci/drivers/c6xx", qat.join("driver")).unwrap();
        let found = scan(&root);
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].address, "0000:3d:00.0");
        assert_eq!(found[0].driver.as_deref(), Some("c6xx"));
        assert_eq!(found[0].id, "8086:37c8");
    }
}
