{
  description = "Tollgate, an LLM API gateway";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-25.11";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" "x86_64-darwin" "aarch64-darwin" ];
      forAll = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
    in
    {
      devShells = forAll (pkgs: {
        default = pkgs.mkShell {
          # Chromium drives the console's browser tests (test/console); nixpkgs builds it for Linux only.
          packages = [ pkgs.nodejs_24 pkgs.redis pkgs.postgresql ] ++ pkgs.lib.optional pkgs.stdenv.isLinux pkgs.chromium;
        };
      });

      packages = forAll (pkgs: {
        default = pkgs.buildNpmPackage {
          pname = "tollgate";
          version = "0.1.0";
          src = ./.;
          nodejs = pkgs.nodejs_24;
          # Each dependency is fetched by the integrity hash in package-lock.json: no separate hash to keep.
          npmDeps = pkgs.importNpmLock { npmRoot = ./.; };
          npmConfigHook = pkgs.importNpmLock.npmConfigHook;
          # No install scripts in the sandbox: the `node` devDependency's preinstall fetches Node from the
          # registry, which a Nix build cannot reach; its bin link then dangles and npm scripts find
          # nodejs_24 next on PATH. esbuild's platform binary comes as an optional dependency, without scripts.
          npmFlags = [ "--ignore-scripts" ];
          npmRebuildFlags = [ "--ignore-scripts" ];
          npmBuildScript = "build";
          installPhase = ''
            runHook preInstall
            mkdir -p $out/bin $out/lib/tollgate
            cp -r bin dist config package.json $out/lib/tollgate/
            ln -s $out/lib/tollgate/bin/tollgate $out/bin/tollgate
            ln -s $out/lib/tollgate/bin/fakeprovider $out/bin/fakeprovider
            runHook postInstall
          '';
          meta.mainProgram = "tollgate";
        };
      });
    };
}
