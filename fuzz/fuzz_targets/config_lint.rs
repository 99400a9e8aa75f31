//! `doctor`'s config linter on arbitrary client.properties, librdkafka.conf and my.cnf text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shiqi_connect::doctor::configs::{ConfigFile, Kind};
use shiqi_connect::doctor::lint;

fuzz_target!(|data: &[u8]| {
    let Some((which, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let kind = match which % 3 {
        0 => Kind::Java,
        1 => Kind::Librdkafka,
        _ => Kind::Mysql,
    };
    let file = ConfigFile::parse(kind, &text);
    let _ = lint::lint(&file);
    let _ = lint::mysql_tls_disabled(&file);
    let _ = lint::near_miss(&file, "security.protocol");
});
