//! A fake `nvidia-smi` for the device check's own test: `-q -x`, `--version` and `dmon -c N`
//! from the same JSON scenario the fake library reads (`FAKE_SMI_SCENARIO`, else
//! `FAKE_NVML_SCENARIO`), in the shape of the real tool's output (nvsmi_device_v12.dtd, as in
//! the driver 535 capture under tests/fixtures/nvidia-smi). Where the scenario makes a call
//! answer NOT_SUPPORTED or NO_PERMISSION, the field reads `N/A`, as the real tool prints it.

use std::fmt::Write as _;
use std::process::ExitCode;

use fake_nvml::scenario::Scenario;
use fake_nvml::state::{Card, Dev, NO_ID, State};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let state = match load() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fake nvidia-smi: {e}");
            // The real tool's exit code when it cannot talk to the driver.
            return ExitCode::from(9);
        }
    };
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["--version"] => print!("{}", version(&state)),
        ["-q", "-x"] | ["-x", "-q"] | ["--query", "--xml-format"] => print!("{}", xml(&state)),
        ["dmon", rest @ ..] => dmon(&state, rest),
        _ => {
            eprintln!("fake nvidia-smi: only --version, -q -x and dmon [-c N] are implemented");
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}

fn load() -> Result<State, String> {
    let path = std::env::var_os("FAKE_SMI_SCENARIO")
        .or_else(|| std::env::var_os("FAKE_NVML_SCENARIO"))
        .ok_or("neither FAKE_SMI_SCENARIO nor FAKE_NVML_SCENARIO is set")?;
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.to_string_lossy()))?;
    State::load(Scenario::parse(&text)?).map_err(|e| e.to_string())
}

fn version(s: &State) -> String {
    let d = &s.driver_version;
    format!(
        "NVIDIA-SMI version  : {d}\nNVML version        : {}\nDRIVER version      : {d}\nCUDA Version        : 12.4\n",
        nvml_version(d)
    )
}

fn nvml_version(driver: &str) -> String {
    format!("12.{driver}")
}

/// Whether the scenario makes `func` fail for this card (the field is then N/A).
fn fails(card: &Card, func: &str) -> bool {
    let base = func.trim_end_matches(|c: char| c.is_ascii_digit()).trim_end_matches("_v");
    card.spec.not_supported.iter().chain(&card.spec.no_permission).any(|n| n == func || n == base)
}

fn value(card: &Card, func: &str, v: impl std::fmt::Display) -> String {
    if fails(card, func) { "N/A".into() } else { v.to_string() }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn compute_mode(mode: u32) -> &'static str {
    use nvml_wrapper_sys::bindings::{
        nvmlComputeMode_enum_NVML_COMPUTEMODE_EXCLUSIVE_PROCESS as EXCLUSIVE,
        nvmlComputeMode_enum_NVML_COMPUTEMODE_PROHIBITED as PROHIBITED,
    };
    match mode {
        EXCLUSIVE => "Exclusive_Process",
        PROHIBITED => "Prohibited",
        _ => "Default",
    }
}

fn xml(s: &State) -> String {
    let mut o = String::new();
    o.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    o.push_str("<!DOCTYPE nvidia_smi_log SYSTEM \"nvsmi_device_v12.dtd\">\n<nvidia_smi_log>\n");
    let _ = writeln!(o, "\t<timestamp>Thu Dec  3 12:00:00 2026</timestamp>");
    let _ = writeln!(o, "\t<driver_version>{}</driver_version>", escape(&s.driver_version));
    let _ = writeln!(o, "\t<cuda_version>12.4</cuda_version>");
    let _ = writeln!(o, "\t<attached_gpus>{}</attached_gpus>", s.cards.len());
    for card in &s.cards {
        gpu(&mut o, s, card);
    }
    o.push_str("</nvidia_smi_log>\n");
    o
}

fn gpu(o: &mut String, s: &State, card: &Card) {
    let spec = &card.spec;
    let whole = Dev { card: card.index, mig: None };
    let (total, used) = s.memory(whole);
    let mib = 1024 * 1024;
    let _ = writeln!(o, "\t<gpu id=\"{}\">", card.pci.bus_id);
    let _ = writeln!(o, "\t\t<product_name>{}</product_name>", escape(&value(card, "nvmlDeviceGetName", &spec.name)));
    let mig = |on: bool| if on { "Enabled" } else { "Disabled" };
    let _ = writeln!(o, "\t\t<mig_mode>");
    if card.model.is_some() && !fails(card, "nvmlDeviceGetMigMode") {
        let _ = writeln!(o, "\t\t\t<current_mig>{}</current_mig>", mig(card.mig_enabled));
        let _ = writeln!(o, "\t\t\t<pending_mig>{}</pending_mig>", mig(card.mig_pending));
    } else {
        let _ = writeln!(o, "\t\t\t<current_mig>N/A</current_mig>\n\t\t\t<pending_mig>N/A</pending_mig>");
    }
    let _ = writeln!(o, "\t\t</mig_mode>");
    if card.mig_enabled {
        let _ = writeln!(o, "\t\t<mig_devices>");
        let mut n = 0;
        for (gi, g) in &card.gis {
            for ci in g.cis.keys() {
                let (t, u) = s.memory(Dev { card: card.index, mig: Some((*gi, *ci)) });
                let _ = writeln!(
                    o,
                    "\t\t\t<mig_device>\n\t\t\t\t<index>{n}</index>\n\t\t\t\t<gpu_instance_id>{gi}</gpu_instance_id>\n\
                     \t\t\t\t<compute_instance_id>{ci}</compute_instance_id>\n\t\t\t\t<fb_memory_usage>\n\
                     \t\t\t\t\t<total>{} MiB</total>\n\t\t\t\t\t<reserved>0 MiB</reserved>\n\t\t\t\t\t<used>{} MiB</used>\n\
                     \t\t\t\t\t<free>{} MiB</free>\n\t\t\t\t</fb_memory_usage>\n\t\t\t</mig_device>",
                    t / mib,
                    u / mib,
                    t.saturating_sub(u) / mib
                );
                n += 1;
            }
        }
        let _ = writeln!(o, "\t\t</mig_devices>");
    } else {
        let _ = writeln!(o, "\t\t<mig_devices>\n\t\t\tNone\n\t\t</mig_devices>");
    }
    let _ = writeln!(o, "\t\t<serial>{}</serial>", 1_650_522_000_000_u64 + card.index as u64);
    let _ = writeln!(o, "\t\t<uuid>{}</uuid>", value(card, "nvmlDeviceGetUUID", &card.uuid));
    let _ = writeln!(o, "\t\t<pci>\n\t\t\t<pci_bus_id>{}</pci_bus_id>\n\t\t</pci>", card.pci.bus_id);
    let mem = |v: u64| value(card, "nvmlDeviceGetMemoryInfo_v2", format!("{} MiB", v / mib));
    let _ = writeln!(
        o,
        "\t\t<fb_memory_usage>\n\t\t\t<total>{}</total>\n\t\t\t<reserved>0 MiB</reserved>\n\t\t\t<used>{}</used>\n\
         \t\t\t<free>{}</free>\n\t\t</fb_memory_usage>",
        mem(total),
        mem(used),
        mem(total.saturating_sub(used))
    );
    let _ = writeln!(
        o,
        "\t\t<compute_mode>{}</compute_mode>",
        value(card, "nvmlDeviceGetComputeMode", compute_mode(card.compute_mode))
    );
    let util = |v: u32| {
        if card.mig_enabled {
            "N/A".to_string()
        } else {
            value(card, "nvmlDeviceGetUtilizationRates", format!("{v} %"))
        }
    };
    let _ = writeln!(
        o,
        "\t\t<utilization>\n\t\t\t<gpu_util>{}</gpu_util>\n\t\t\t<memory_util>{}</memory_util>\n\t\t</utilization>",
        util(spec.utilization_gpu),
        util(spec.utilization_memory)
    );
    let ecc = value(card, "nvmlDeviceGetTotalEccErrors", spec.ecc_volatile_uncorrected);
    let _ = writeln!(
        o,
        "\t\t<ecc_errors>\n\t\t\t<volatile>\n\t\t\t\t<sram_correctable>0</sram_correctable>\n\
         \t\t\t\t<sram_uncorrectable>{}</sram_uncorrectable>\n\t\t\t\t<dram_correctable>0</dram_correctable>\n\
         \t\t\t\t<dram_uncorrectable>{ecc}</dram_uncorrectable>\n\t\t\t</volatile>\n\t\t</ecc_errors>",
        if ecc == "N/A" { "N/A" } else { "0" }
    );
    let temp = value(card, "nvmlDeviceGetTemperature", format!("{} C", spec.temperature_c));
    let _ = writeln!(o, "\t\t<temperature>\n\t\t\t<gpu_temp>{temp}</gpu_temp>\n\t\t</temperature>");
    let watts = |mw: u32| format!("{:.2} W", f64::from(mw) / 1000.0);
    let _ = writeln!(
        o,
        "\t\t<gpu_power_readings>\n\t\t\t<power_draw>{}</power_draw>\n\t\t\t<current_power_limit>{}</current_power_limit>\n\
         \t\t</gpu_power_readings>",
        value(card, "nvmlDeviceGetPowerUsage", watts(spec.power_mw)),
        value(card, "nvmlDeviceGetEnforcedPowerLimit", watts(spec.power_limit_mw))
    );
    let _ = writeln!(o, "\t\t<processes>");
    let id = |v: u32| if v == NO_ID || !card.mig_enabled { "N/A".to_string() } else { v.to_string() };
    for p in &card.processes {
        let kind = if p.mps { "M+C" } else { "C" };
        let _ = writeln!(
            o,
            "\t\t\t<process_info>\n\t\t\t\t<gpu_instance_id>{}</gpu_instance_id>\n\t\t\t\t<compute_instance_id>{}</compute_instance_id>\n\
             \t\t\t\t<pid>{}</pid>\n\t\t\t\t<type>{kind}</type>\n\t\t\t\t<process_name>fake</process_name>\n\
             \t\t\t\t<used_memory>{} MiB</used_memory>\n\t\t\t</process_info>",
            id(p.gi),
            id(p.ci),
            p.pid,
            p.used_mib
        );
    }
    let _ = writeln!(o, "\t\t</processes>\n\t</gpu>");
}

/// `dmon [-c N]`: the header and N one-second samples (power, temperature, SM and memory use).
fn dmon(s: &State, rest: &[&str]) {
    let count = match rest {
        ["-c", n, ..] => n.parse::<u32>().unwrap_or(1),
        _ => 1,
    };
    println!("# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk");
    println!("# Idx      W      C      C      %      %      %      %      %      %    MHz    MHz");
    for i in 0..count {
        for c in &s.cards {
            let sp = &c.spec;
            let sm = if c.mig_enabled { "-".to_string() } else { sp.utilization_gpu.to_string() };
            println!(
                "{:>5} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6}",
                c.index,
                sp.power_mw / 1000,
                sp.temperature_c,
                "-",
                sm,
                sp.utilization_memory,
                0,
                0,
                0,
                0,
                sp.mem_clock_mhz,
                sp.sm_clock_mhz
            );
        }
        if i + 1 < count {
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    }
}
