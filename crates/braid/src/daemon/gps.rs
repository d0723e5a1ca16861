//! The vehicle's position from gpsd, for location awareness (braid_proto::location): a small
//! client of gpsd's JSON protocol over TCP (<https://gpsd.io/gpsd_json.html>). It asks for reports
//! (`?WATCH={"enable":true,"json":true}`) and turns each TPV report with a 2D or 3D fix into an
//! [`Input::Position`]. Without gpsd the client runs as it would without the feature: one warning,
//! then a quiet retry every [`RETRY`].

use super::Input;
use braid_proto::location::{LocationConfig, MapFile, Position, QualityMap};
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// How long to wait before connecting to gpsd again.
const RETRY: Duration = Duration::from_secs(30);

/// A gpsd report longer than this is not one (gpsd's own reports stay under a few kB).
const MAX_LINE: usize = 16 * 1024;

/// The position a gpsd JSON report gives: a TPV report with a 2D or 3D fix (`mode` 2 or 3) and a
/// latitude and longitude; `None` for any other line, malformed ones included.
pub fn parse_report(line: &str) -> Option<Position> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    if v.get("class")?.as_str()? != "TPV" || v.get("mode")?.as_u64()? < 2 {
        return None;
    }
    let f = |k: &str| v.get(k).and_then(serde_json::Value::as_f64);
    Position::from_lat_lon(f("lat")?, f("lon")?, f("speed").unwrap_or(f64::NAN), f("track").unwrap_or(f64::NAN))
}

/// Reads gpsd at `addr` for as long as the daemon runs, sending each fix to `tx`.
pub fn spawn(addr: String, tx: mpsc::Sender<Input>) {
    tokio::spawn(async move {
        let mut warned = false;
        loop {
            match watch(&addr, &tx).await {
                Ok(()) => return, // the daemon is stopping
                Err(e) if !warned => {
                    tracing::warn!(
                        gpsd = %addr,
                        error = %e,
                        "no position from gpsd: location awareness inactive until it answers"
                    );
                    warned = true;
                }
                Err(e) => tracing::debug!(gpsd = %addr, error = %e, "gpsd still unavailable"),
            }
            tokio::time::sleep(RETRY).await;
        }
    });
}

/// One connection to gpsd: `Ok` when the daemon's input channel closed, `Err` when gpsd went away.
async fn watch(addr: &str, tx: &mpsc::Sender<Input>) -> std::io::Result<()> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.write_all(b"?WATCH={\"enable\":true,\"json\":true};\n").await?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    let mut fixes = 0u64;
    loop {
        line.clear();
        let n = (&mut reader).take(MAX_LINE as u64).read_line(&mut line).await?;
        if n == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "gpsd closed the connection"));
        }
        if !line.ends_with('\n') && n >= MAX_LINE {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "gpsd sent an overlong line"));
        }
        if let Some(pos) = parse_report(line.trim_end()) {
            fixes += 1;
            if fixes == 1 {
                tracing::info!(gpsd = %addr, "position from gpsd: location awareness active");
            }
            if tx.send(Input::Position(pos)).await.is_err() {
                return Ok(());
            }
        }
    }
}

/// The location map saved at `path`: empty, with a warning that says why, when the file is
/// absent, unreadable, not a map or one learned on another grid.
pub fn load_map(path: &Path, cfg: &LocationConfig) -> QualityMap {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::info!(map = %path.display(), "no location map yet: starting empty");
            return QualityMap::new();
        }
        Err(e) => {
            tracing::warn!(map = %path.display(), error = %e, "location map unreadable: starting empty");
            return QualityMap::new();
        }
    };
    let file = match serde_json::from_slice::<MapFile>(&bytes) {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(map = %path.display(), error = %e, "location map is corrupt: starting empty");
            return QualityMap::new();
        }
    };
    match QualityMap::from_file(cfg, file) {
        Ok(m) => {
            tracing::info!(map = %path.display(), cells = m.len(), "location map loaded");
            m
        }
        Err(e) => {
            tracing::warn!(map = %path.display(), error = %e, "location map refused: starting empty");
            QualityMap::new()
        }
    }
}

/// Writes `map` to `path` (through a temporary file and a rename, so a crash leaves the old map
/// or the new one, never half of one).
pub fn save_map(path: &Path, map: &QualityMap, cfg: &LocationConfig) -> std::io::Result<()> {
    super::write_json_atomically(path, &map.to_file(cfg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_map_survives_a_restart_and_a_corrupt_one_starts_empty() {
        let dir = std::env::temp_dir().join(format!("braid-locmap-{}", std::process::id()));
        let path = dir.join("sub").join("location.json");
        let cfg = LocationConfig { enabled: true, min_samples: 1, ..LocationConfig::default() };
        let mut map = QualityMap::new();
        let at = Position { x_m: 120.0, y_m: 40.0, vx_mps: 0.0, vy_mps: 0.0 };
        map.observe(&cfg, "wifi", at, 1.0);
        save_map(&path, &map, &cfg).unwrap();
        let back = load_map(&path, &cfg);
        assert_eq!(back.quality(&cfg, "wifi", 120.0, 40.0), Some(1.0));
        std::fs::write(&path, b"{\"version\": 1, \"cells\": [").unwrap();
        assert!(load_map(&path, &cfg).is_empty());
        assert!(load_map(&dir.join("absent.json"), &cfg).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn tpv_reports_with_a_fix_give_a_position() {
        let p = parse_report(
            r#"{"class":"TPV","device":"/dev/ttyUSB0","mode":3,"time":"2026-01-01T00:00:00.000Z","lat":52.5,"lon":13.4,"alt":40.0,"track":90.0,"speed":12.5}"#,
        )
        .unwrap();
        assert!((p.vx_mps - 12.5).abs() < 1e-9, "{p:?}");
        assert!((p.y_m - 52.5 * 111_320.0).abs() < 1e-6);
    }

    #[test]
    fn other_lines_give_nothing() {
        assert_eq!(parse_report(r#"{"class":"TPV","mode":1}"#), None, "no fix");
        assert_eq!(parse_report(r#"{"class":"SKY","satellites":[]}"#), None);
        assert_eq!(parse_report(r#"{"class":"VERSION","release":"3.25"}"#), None);
        assert_eq!(parse_report(r#"{"class":"TPV","mode":2,"lat":"x","lon":1}"#), None);
        assert_eq!(parse_report("not json"), None);
        assert_eq!(parse_report(r#"{"class":"TPV","mode":2,"lat":95,"lon":1}"#), None, "off the globe");
    }
}
