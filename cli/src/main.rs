//! `caucus`: the command-line client.

use clap::Parser;

fn main() {
    let cli = caucus_cli::Cli::parse();
    // Before any thread exists: pick up the local stack's URLs.
    caucus_cli::load_stack_env();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("caucus: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = rt.block_on(async {
        match caucus_cli::run(cli).await {
            Ok(code) => code,
            Err(e) => {
                eprintln!("caucus: {e:#}");
                1
            }
        }
    });
    std::process::exit(code);
}
