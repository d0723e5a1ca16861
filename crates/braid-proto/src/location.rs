//! Location awareness (Hadaller et al., MobiSys 2007, "paper 002", section 8): conditions near a
//! roadside access point repeat from one drive past it to the next, so a vehicle that remembers
//! where each uplink was good can admit it the moment it gets there, without first proving it by
//! probes in the fringe, and drain it before the place where it fades.
//!
//! The client feeds its position ([`crate::Session::handle_position`]); the session records, per
//! uplink, how good the link is in the cell of a square grid it is in ([`QualityMap`]), and
//! consults the map for the cell it is in and the cells it will cross within
//! [`LocationConfig::lookahead`]. Positions are metres on a local plane: the simulator gives its
//! route position, the daemon projects gpsd's latitude and longitude ([`Position::from_lat_lon`]).
//!
//! The map is bounded ([`LocationConfig::max_cells`]; the least recently visited cells go first)
//! and serialisable, so the daemon keeps it on disk across restarts ([`MapFile`]).

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::Duration;

/// Where the vehicle is and how it moves, in metres on a local plane.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Position {
    /// East, m.
    pub x_m: f64,
    /// North, m.
    pub y_m: f64,
    /// Velocity east, m/s.
    pub vx_mps: f64,
    /// Velocity north, m/s.
    pub vy_mps: f64,
}

/// Metres per degree of latitude (the mean, WGS-84).
const M_PER_DEG: f64 = 111_320.0;

impl Position {
    /// A fix from a GPS receiver: latitude and longitude in degrees, speed over ground in m/s and
    /// track in degrees clockwise from north. The projection is equirectangular, which is all a
    /// cell of tens of metres needs: the same place always lands in the same cell. `None` for a
    /// fix that is not finite or not on the globe.
    pub fn from_lat_lon(lat: f64, lon: f64, speed_mps: f64, track_deg: f64) -> Option<Position> {
        if !(lat.is_finite() && lon.is_finite() && lat.abs() <= 90.0 && lon.abs() <= 180.0) {
            return None;
        }
        let (speed, track) = if speed_mps.is_finite() && track_deg.is_finite() {
            (speed_mps.max(0.0), track_deg.to_radians())
        } else {
            (0.0, 0.0)
        };
        Some(Position {
            x_m: lon * M_PER_DEG * lat.to_radians().cos(),
            y_m: lat * M_PER_DEG,
            vx_mps: speed * track.sin(),
            vy_mps: speed * track.cos(),
        })
    }

    /// The inverse of [`Self::from_lat_lon`]'s projection: latitude and longitude in degrees, speed
    /// over ground in m/s and track in degrees clockwise from north, as a GPS receiver reports them
    /// (the testbed plays gpsd with it).
    pub fn to_lat_lon(&self) -> (f64, f64, f64, f64) {
        let lat = self.y_m / M_PER_DEG;
        let lon = self.x_m / (M_PER_DEG * lat.to_radians().cos());
        let speed = self.vx_mps.hypot(self.vy_mps);
        let track = self.vx_mps.atan2(self.vy_mps).to_degrees().rem_euclid(360.0);
        (lat, lon, speed, track)
    }
}

/// How location awareness learns and acts; off unless `enabled`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LocationConfig {
    /// Learn the map and act on it. Off by default until it proves itself (docs/drive-by.md).
    pub enabled: bool,
    /// Side of a grid cell, m.
    pub cell_m: f64,
    /// How far ahead in time the vehicle looks for a place where a link fades.
    pub lookahead: Duration,
    /// Cells kept, over all links; beyond it the least recently visited go.
    pub max_cells: usize,
    /// Weight of a new observation in a cell's quality (an exponential average).
    pub alpha: f64,
    /// Observations a cell needs before it is believed.
    pub min_samples: u32,
    /// A cell at least this good admits a link on its first probe reply.
    pub good: f64,
    /// A cell at most this good ahead drains a link.
    pub bad: f64,
}

impl Default for LocationConfig {
    fn default() -> Self {
        LocationConfig {
            enabled: false,
            cell_m: 50.0,
            lookahead: Duration::from_secs(3),
            max_cells: 65_536,
            alpha: 0.2,
            min_samples: 5,
            good: 0.7,
            bad: 0.3,
        }
    }
}

/// What the map says of a link where the vehicle is and where it is going.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Expectation {
    /// The link has been good here: admit it on its first probe reply.
    pub good_here: bool,
    /// The link has been good within the lookahead: probe it at the probing period.
    pub good_soon: bool,
    /// The link has been bad within the lookahead: drain it.
    pub fades_soon: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Cell {
    quality: f32,
    samples: u32,
    /// When it was last visited, in map updates: the eviction order.
    stamp: u64,
}

/// Per link, the quality seen in each cell of a grid: 1 where it carried data at low loss, 0
/// where it was down, probing or lossy.
#[derive(Debug, Clone, Default)]
pub struct QualityMap {
    cells: HashMap<(String, i64, i64), Cell>,
    clock: u64,
}

impl QualityMap {
    /// An empty map.
    pub fn new() -> Self {
        QualityMap::default()
    }

    /// Cells held, over all links.
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// Whether nothing has been learned.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    fn cell_of(cfg: &LocationConfig, x: f64, y: f64) -> (i64, i64) {
        ((x / cfg.cell_m).floor() as i64, (y / cfg.cell_m).floor() as i64)
    }

    /// Records that `link` was as good as `quality` (0..=1) at `pos`.
    pub fn observe(&mut self, cfg: &LocationConfig, link: &str, pos: Position, quality: f64) {
        self.clock += 1;
        let (cx, cy) = Self::cell_of(cfg, pos.x_m, pos.y_m);
        let q = quality.clamp(0.0, 1.0) as f32;
        let stamp = self.clock;
        let key = (link.to_owned(), cx, cy);
        match self.cells.get_mut(&key) {
            Some(c) => {
                c.quality += (q - c.quality) * cfg.alpha as f32;
                c.samples = c.samples.saturating_add(1);
                c.stamp = stamp;
            }
            None => {
                self.cells.insert(key, Cell { quality: q, samples: 1, stamp });
                self.bound(cfg.max_cells);
            }
        }
    }

    /// Drops the least recently visited cells until at most `max` remain (an eighth more, so
    /// that a full map does not sort on every new cell).
    fn bound(&mut self, max: usize) {
        if self.cells.len() <= max {
            return;
        }
        let target = max - max / 8;
        let mut stamps: Vec<u64> = self.cells.values().map(|c| c.stamp).collect();
        stamps.sort_unstable();
        let cut = stamps[self.cells.len() - target];
        self.cells.retain(|_, c| c.stamp >= cut);
    }

    /// The learned quality of `link` at `(x, y)`, if the cell has been seen often enough.
    pub fn quality(&self, cfg: &LocationConfig, link: &str, x: f64, y: f64) -> Option<f64> {
        let (cx, cy) = Self::cell_of(cfg, x, y);
        let c = self.cells.get(&(link.to_owned(), cx, cy))?;
        (c.samples >= cfg.min_samples).then_some(f64::from(c.quality))
    }

    /// What the map expects of `link` at `pos` and along its path for the lookahead.
    pub fn expect(&self, cfg: &LocationConfig, link: &str, pos: Position) -> Expectation {
        let here = self.quality(cfg, link, pos.x_m, pos.y_m);
        let mut e = Expectation { good_here: here.is_some_and(|q| q >= cfg.good), ..Expectation::default() };
        let secs = cfg.lookahead.as_secs_f64();
        let dist = (pos.vx_mps.hypot(pos.vy_mps) * secs).min(10_000.0);
        // Sample the path at half a cell so no cell on it is skipped.
        let steps = (dist / (cfg.cell_m / 2.0)).ceil() as usize;
        for i in 0..=steps {
            let f = if steps == 0 { 0.0 } else { i as f64 / steps as f64 };
            let (x, y) = (pos.x_m + pos.vx_mps * secs * f, pos.y_m + pos.vy_mps * secs * f);
            match self.quality(cfg, link, x, y) {
                Some(q) if q >= cfg.good => e.good_soon = true,
                Some(q) if q <= cfg.bad => e.fades_soon = true,
                _ => {}
            }
        }
        e
    }

    /// The map as a file's contents.
    pub fn to_file(&self, cfg: &LocationConfig) -> MapFile {
        let mut cells: Vec<(&(String, i64, i64), &Cell)> = self.cells.iter().collect();
        cells.sort_by_key(|(_, c)| c.stamp);
        MapFile {
            version: MapFile::VERSION,
            cell_m: cfg.cell_m,
            cells: cells
                .into_iter()
                .map(|((link, x, y), c)| CellRecord {
                    link: link.clone(),
                    x: *x,
                    y: *y,
                    quality: c.quality,
                    samples: c.samples,
                })
                .collect(),
        }
    }

    /// The map a file holds, checked: a file of another version or cell size, or with a value out
    /// of range, is refused (the caller warns and starts empty); more cells than `max_cells` keeps
    /// the newest.
    pub fn from_file(cfg: &LocationConfig, file: MapFile) -> Result<QualityMap, MapFileError> {
        if file.version != MapFile::VERSION {
            return Err(MapFileError::Version(file.version));
        }
        if file.cell_m != cfg.cell_m {
            return Err(MapFileError::CellSize(file.cell_m, cfg.cell_m));
        }
        let mut map = QualityMap::new();
        let skip = file.cells.len().saturating_sub(cfg.max_cells);
        for c in file.cells.into_iter().skip(skip) {
            if !(0.0..=1.0).contains(&c.quality) || c.link.is_empty() || c.link.len() > 64 {
                return Err(MapFileError::Cell(c.link, c.x, c.y));
            }
            map.clock += 1;
            map.cells.insert((c.link, c.x, c.y), Cell { quality: c.quality, samples: c.samples, stamp: map.clock });
        }
        Ok(map)
    }
}

/// A quality map as it is kept on disk (JSON in the daemon).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MapFile {
    /// Format version, [`MapFile::VERSION`].
    pub version: u32,
    /// The grid's cell size, m: a map learned on another grid does not apply.
    pub cell_m: f64,
    /// Every cell, least recently visited first.
    pub cells: Vec<CellRecord>,
}

impl MapFile {
    /// The format this build writes and reads.
    pub const VERSION: u32 = 1;
}

/// One cell of a [`MapFile`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CellRecord {
    /// The uplink's name.
    pub link: String,
    /// Cell column (east), in cells.
    pub x: i64,
    /// Cell row (north), in cells.
    pub y: i64,
    /// Learned quality, 0..=1.
    pub quality: f32,
    /// Observations behind it.
    pub samples: u32,
}

/// Why a map file was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MapFileError {
    /// Written by a build with another format.
    #[error("map format version {0}, this build reads version 1")]
    Version(u32),
    /// Learned on another grid.
    #[error("map cells are {0} m, this build uses {1} m")]
    CellSize(f64, f64),
    /// A cell's values are out of range.
    #[error("cell ({1}, {2}) of link {0:?} is out of range")]
    Cell(String, i64, i64),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(x: f64, v: f64) -> Position {
        Position { x_m: x, y_m: 0.0, vx_mps: v, vy_mps: 0.0 }
    }

    fn learned() -> (LocationConfig, QualityMap) {
        let cfg = LocationConfig { enabled: true, ..LocationConfig::default() };
        let mut m = QualityMap::new();
        // Good from 1000 to 2000 m, bad elsewhere, seen ten times.
        for _ in 0..10 {
            for x in (0..3000).step_by(10) {
                let q = if (1000..2000).contains(&x) { 1.0 } else { 0.0 };
                m.observe(&cfg, "wifi", at(f64::from(x), 14.0), q);
            }
        }
        (cfg, m)
    }

    #[test]
    fn a_learned_route_admits_ahead_and_drains_before_the_fade() {
        let (cfg, m) = learned();
        let e = m.expect(&cfg, "wifi", at(1500.0, 14.0));
        assert!(e.good_here && !e.fades_soon, "{e:?}");
        // 3 s at 14 m/s is 42 m: at 1970 m the bad cell from 2000 m is ahead.
        let e = m.expect(&cfg, "wifi", at(1970.0, 14.0));
        assert!(e.good_here && e.fades_soon, "{e:?}");
        let e = m.expect(&cfg, "wifi", at(970.0, 14.0));
        assert!(!e.good_here && e.good_soon, "{e:?}");
        // Another link, or a place never seen, expects nothing.
        assert_eq!(m.expect(&cfg, "lte", at(1500.0, 14.0)), Expectation::default());
        assert_eq!(m.expect(&cfg, "wifi", at(9000.0, 14.0)), Expectation::default());
    }

    #[test]
    fn a_cell_seen_once_is_not_believed() {
        let cfg = LocationConfig::default();
        let mut m = QualityMap::new();
        m.observe(&cfg, "wifi", at(10.0, 0.0), 1.0);
        assert_eq!(m.quality(&cfg, "wifi", 10.0, 0.0), None);
    }

    #[test]
    fn the_map_stays_bounded_and_keeps_the_recent_cells() {
        let cfg = LocationConfig { max_cells: 100, min_samples: 1, ..LocationConfig::default() };
        let mut m = QualityMap::new();
        for x in 0..1000 {
            m.observe(&cfg, "wifi", at(f64::from(x) * 50.0, 0.0), 1.0);
            assert!(m.len() <= 100);
        }
        assert!(m.quality(&cfg, "wifi", 999.0 * 50.0, 0.0).is_some());
        assert!(m.quality(&cfg, "wifi", 0.0, 0.0).is_none());
    }

    #[test]
    fn the_file_round_trips_and_bad_files_are_refused() {
        let (cfg, m) = learned();
        let file = m.to_file(&cfg);
        let back = QualityMap::from_file(&cfg, file.clone()).unwrap();
        assert_eq!(back.len(), m.len());
        assert_eq!(back.expect(&cfg, "wifi", at(1970.0, 14.0)), m.expect(&cfg, "wifi", at(1970.0, 14.0)));
        let other = LocationConfig { cell_m: 20.0, ..cfg };
        assert!(matches!(QualityMap::from_file(&other, file.clone()), Err(MapFileError::CellSize(..))));
        let mut bad = file.clone();
        bad.cells[0].quality = 7.0;
        assert!(matches!(QualityMap::from_file(&cfg, bad), Err(MapFileError::Cell(..))));
        let small = LocationConfig { max_cells: 10, ..cfg };
        assert_eq!(QualityMap::from_file(&small, file).unwrap().len(), 10);
    }

    #[test]
    fn gps_fixes_project_to_metres() {
        let a = Position::from_lat_lon(52.0, 13.0, 10.0, 90.0).unwrap();
        let b = Position::from_lat_lon(52.0 + 50.0 / M_PER_DEG, 13.0, 10.0, 90.0).unwrap();
        assert!((b.y_m - a.y_m - 50.0).abs() < 1e-6);
        assert!((a.vx_mps - 10.0).abs() < 1e-9 && a.vy_mps.abs() < 1e-9, "due east");
        assert!(Position::from_lat_lon(f64::NAN, 0.0, 0.0, 0.0).is_none());
        // A position along a road on the equator goes to gpsd's fields and back to itself.
        let along = Position { x_m: 1234.5, y_m: 0.0, vx_mps: 22.2, vy_mps: 0.0 };
        let (lat, lon, speed, track) = along.to_lat_lon();
        let back = Position::from_lat_lon(lat, lon, speed, track).unwrap();
        assert!((back.x_m - along.x_m).abs() < 1e-6 && back.y_m.abs() < 1e-6, "{back:?}");
        assert!(
            (back.vx_mps - 22.2).abs() < 1e-9 && back.vy_mps.abs() < 1e-9 && (track - 90.0).abs() < 1e-9,
            "{back:?}"
        );
        assert!(Position::from_lat_lon(91.0, 0.0, 0.0, 0.0).is_none());
    }
}
