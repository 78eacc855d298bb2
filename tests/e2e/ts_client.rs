//! The TypeScript client, installed with one plain `npm install <repo
//! path>` into a scratch project, driving a real gateway: the project gets
//! tests/e2e/ts_client.mjs, which holds the assertions and prints its
//! measurement, and a TypeScript module using `await using`, type-checked
//! strictly against the installed declarations and compiled by tsc for
//! Node 20 (which cannot parse `await using` itself). That its wire types
//! and dist/ are what
//! `gateway/openapi.json` and its sources generate is checked by
//! `scripts/clients --check` (python_client.rs runs it for both clients).

use std::path::{Path, PathBuf};
use std::process::Command;

use cubicle_tests::desk;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A scratch project with the client npm-installed from the repo path, as
/// a user would (no build step: dist/ is committed), this test's script
/// copied in, and playwright-core from web/ linked beside the client.
fn scratch_project() -> tempfile::TempDir {
    let project = tempfile::tempdir().unwrap();
    std::fs::write(
        project.path().join("package.json"),
        r#"{ "name": "scratch", "private": true, "type": "module" }"#,
    )
    .unwrap();
    let install = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund"])
        .arg(repo().join("gateway/clients/typescript"))
        .current_dir(project.path())
        .output()
        .unwrap();
    assert!(
        install.status.success(),
        "npm install gateway/clients/typescript: {}",
        String::from_utf8_lossy(&install.stderr)
    );
    let playwright = repo().join("web/node_modules/playwright-core");
    assert!(
        playwright.exists(),
        "{} is missing: run `npm ci` in web/ (scripts/setup)",
        playwright.display()
    );
    std::os::unix::fs::symlink(
        &playwright,
        project.path().join("node_modules/playwright-core"),
    )
    .unwrap();
    std::fs::copy(
        repo().join("tests/e2e/ts_client.mjs"),
        project.path().join("ts_client.mjs"),
    )
    .unwrap();
    compile_typescript(project.path());
    project
}

/// A user's TypeScript with `await using`: the workspace is deleted when
/// the block ends. ts_client.mjs imports the compiled `using.js`.
const AWAIT_USING: &str = r#"import { type Cubicle, Held } from "cubicle-client";

export async function madeAndDisposed(cubicle: Cubicle): Promise<{ id: string; stdout: string }> {
    await using ws = await cubicle.create({ name: "ts-await-using" });
    const done = await ws.exec(["echo", "used"], { timeout: 10_000 });
    if (done instanceof Held) throw new Error(`held: ${done.url}`);
    return { id: ws.id, stdout: done.stdout };
}
"#;

/// The README's TypeScript example, as written (`token` and `console`
/// declared): type-checked, never run.
fn readme_example() -> String {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let (_, section) = readme
        .split_once("### TypeScript client\n")
        .expect("README.md has a TypeScript client section");
    let (_, block) = section
        .split_once("```ts\n")
        .expect("the section has a ts block");
    let (block, _) = block.split_once("```").expect("the block is closed");
    format!(
        "declare const token: string;\n\
         declare const console: {{ log(...args: unknown[]): void }};\n{block}"
    )
}

/// Type-checks and compiles [`AWAIT_USING`] and the README's example with
/// the client's own pinned tsc (installed by scripts/setup), strictly and
/// with no Node types: what a user's project sees of the installed client.
fn compile_typescript(project: &Path) {
    let tsc = repo().join("gateway/clients/typescript/node_modules/.bin/tsc");
    assert!(
        tsc.exists(),
        "{} is missing: run scripts/setup",
        tsc.display()
    );
    std::fs::write(project.join("using.ts"), AWAIT_USING).unwrap();
    std::fs::write(project.join("readme.ts"), readme_example()).unwrap();
    let compile = Command::new(tsc)
        .args(["--strict", "--skipLibCheck", "false", "--target", "ES2022"])
        .args(["--module", "NodeNext", "--moduleResolution", "NodeNext"])
        .args(["--lib", "ES2022,ESNext.Disposable"])
        .args(["using.ts", "readme.ts"])
        .current_dir(project)
        .output()
        .unwrap();
    assert!(
        compile.status.success(),
        "tsc using.ts readme.ts: {}",
        String::from_utf8_lossy(&compile.stdout)
    );
}

#[tokio::test]
async fn the_typescript_client_drives_a_workspace() {
    if Command::new("npm").arg("--version").output().is_err() {
        cubicle_tests::skip("no npm for the TypeScript client (scripts/setup installs Node.js)");
        return;
    }
    let project = scratch_project();
    let desk::UnderPolicy {
        daemon,
        id,
        agent,
        operator,
        data: _data,
        policies: _policies,
        ..
    } = desk::under_policy("held", desk::HELD_FILES).await;
    let run = tokio::process::Command::new("node")
        .arg("ts_client.mjs")
        .current_dir(project.path())
        .env("CUBICLE_URL", &daemon.base)
        .env("CUBICLE_TOKEN", &agent.secret)
        .env("OPERATOR_TOKEN", &operator.secret)
        .env("WORKSPACE", &id)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    eprintln!("{stdout}");
    assert!(run.status.success(), "ts_client.mjs: {stdout}{stderr}");
    assert!(stdout.contains("ts client: ok"), "{stdout}");
}
