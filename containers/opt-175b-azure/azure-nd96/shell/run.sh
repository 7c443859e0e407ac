#!/usr/bin/env bash
# Provision opt-175b-azure on azure-nd96 (host azure-nd96, facts profile:azure-nd96),
# rendered by envbuild 0.1.0 from the plan; lock digest 9df4614a22d4d82a359359c7fcfd371cf148a827172f6be71c849a92a260009b.
# Regenerate: envbuild render opt-175b-azure --target azure-nd96 --format shell
# usage: bash run.sh [STEP_ID...]   (no argument: every step, in order)
set -euo pipefail
FILES="$(cd "$(dirname "$0")" && pwd)/files"
export FILES

# step preflight: Preflight compatibility check
# why: refuse an infeasible node before installing
step_preflight() {
  :  # nothing to do on this node
}

# step environment: conda environment, Python 3.9
# why: recipe asks for Python 3.9; conda packages python=3.9
step_environment() {
  mkdir -p /mnt/envbuild/envs/opt-175b-azure/.envbuild/state
  mkdir -p /mnt/envbuild/envs/opt-175b-azure/.envbuild && cp "$FILES/assets/node/rattler_create.py" /mnt/envbuild/envs/opt-175b-azure/.envbuild/rattler_create.py && chmod 0644 /mnt/envbuild/envs/opt-175b-azure/.envbuild/rattler_create.py
  mkdir -p /mnt/envbuild/envs/opt-175b-azure/.envbuild
  python3 /mnt/envbuild/envs/opt-175b-azure/.envbuild/rattler_create.py --prefix /mnt/envbuild/envs/opt-175b-azure python=3.9 > /mnt/envbuild/envs/opt-175b-azure/.envbuild/conda-packages.txt
  sh -c 'test -x "$1/bin/python" || { echo "$1/bin/python is missing after installing the conda packages from $3; add python=$2 to the conda specs or leave python out to use the node'"'"'s Python" >&2; exit 1; }' sh /mnt/envbuild/envs/opt-175b-azure 3.9 conda-forge
}

# step pip-tooling: pip==23.0.1, setuptools==59.5.0, wheel==0.45.1
# why: newest pip release admitted by the recipe's pip<23.1; setuptools pinned by the recipe; apex,
# why: megatron, metaseq, fairscale built with --no-build-isolation: setuptools < 70.1 needs the wheel
# why: package (< 0.46) for bdist_wheel and editable installs; without it pip fails with "invalid
# why: command 'bdist_wheel'"
step_pip_tooling() {
  mkdir -p /mnt/envbuild/envs/opt-175b-azure/.envbuild/requirements && cat > /mnt/envbuild/envs/opt-175b-azure/.envbuild/requirements/pip-tooling.txt <<'ENVBUILD_EOF_01b14c89ead8' && chmod 0644 /mnt/envbuild/envs/opt-175b-azure/.envbuild/requirements/pip-tooling.txt
pip==23.0.1 --hash=sha256:236bcb61156d76c4b8a05821b988c7b8c35bf0da28a4b614e8d6ab5212c25c6f
setuptools==59.5.0 --hash=sha256:6d10741ff20b89cd8c6a536ee9dc90d3002dec0226c78fb98605bfb9ef8a7adf
wheel==0.45.1 --hash=sha256:708e7481cc80179af0e556bbf0cc00b8444c7321e2700b8d8580231d13017248
ENVBUILD_EOF_01b14c89ead8
  /mnt/envbuild/envs/opt-175b-azure/bin/python -m pip install --no-input --disable-pip-version-check -r /mnt/envbuild/envs/opt-175b-azure/.envbuild/requirements/pip-tooling.txt --require-hashes --no-deps
}

# step pip:torch: torch 1.10.1+cu113
# why: torch from the index that carries the variant matched to this node; without a hash in the lock:
# why: torch
step_pip_torch() {
  mkdir -p /mnt/envbuild/envs/opt-175b-azure/.envbuild/requirements && cat > /mnt/envbuild/envs/opt-175b-azure/.envbuild/requirements/pip-torch-unverified.txt <<'ENVBUILD_EOF_712e4951ca9f' && chmod 0644 /mnt/envbuild/envs/opt-175b-azure/.envbuild/requirements/pip-torch-unverified.txt
torch==1.10.1+cu113
ENVBUILD_EOF_712e4951ca9f
  /mnt/envbuild/envs/opt-175b-azure/bin/python -m pip install --no-input --disable-pip-version-check -r /mnt/envbuild/envs/opt-175b-azure/.envbuild/requirements/pip-torch-unverified.txt --no-deps --find-links=https://download.pytorch.org/whl/torch_stable.html
}

# step pip:packages: 129 Python packages (lock order)
# why: every locked package at its exact version, hash-checked
step_pip_packages() {
  mkdir -p /mnt/envbuild/envs/opt-175b-azure/.envbuild/requirements && cat > /mnt/envbuild/envs/opt-175b-azure/.envbuild/requirements/pip-packages.txt <<'ENVBUILD_EOF_705558b1c40c' && chmod 0644 /mnt/envbuild/envs/opt-175b-azure/.envbuild/requirements/pip-packages.txt
absl-py==1.4.0 --hash=sha256:0d3fe606adfa4f7db64792dd4c7aee4ee0c38ab75dfd353b7a83ed3e957fcb47
aim-ui==3.16.2 --hash=sha256:da0116726ce011548c307fe6fee53f3acf5db6ef5e6f011ff2c3d164e1c9f78b
aimrocks==0.4.0 --hash=sha256:6fa9b170d0950d8dd2f13630545031771a9029f6001d93553d538028bcbb891d
aiofiles==23.1.0 --hash=sha256:9312414ae06472eb6f1d163f555e466a23aed1c8f60c30cccf7121dba2e53eb2
antlr4-python3-runtime==4.8 --hash=sha256:15793f5d0512a372b4e7d2284058ad32ce7dd27126b105fb0b2245130445db33
attrs==22.2.0 --hash=sha256:29e95c7f6778868dbd49170f98f8818f78f3dc5e0e37c0b1f474e3561b240836
backcall==0.2.0 --hash=sha256:fbbce6a29f263178a1f7915c1940bde0ec2b2a967566fe1c65c1dfb7422bd255
backoff==2.2.1 --hash=sha256:63579f9a0628e06278f7e47b7d7d5b6ce20dc65c5e96a6f3ca99a6adca0396e8
base58==2.0.1 --hash=sha256:447adc750d6b642987ffc6d397ecd15a799852d5f6a1d308d384500243825058
aimrecords==0.0.7 --hash=sha256:b9276890891c5fd68f817e20fc5d466a80c01e22fa468eaa979331448a75d601
cachetools==5.3.0 --hash=sha256:429e1a1e845c008ea6c85aa35d4b98b65d6a9763eeef3e37e92728a12d1de9d4
certifi==2022.12.7 --hash=sha256:4ad3232f5e926d6718ec31cfc1fcadfde020920e278684144551c91769c7bc18
cfgv==3.3.1 --hash=sha256:c6a0883f3917a037485059700b9e75da2464e6c27051014ad85ba6aaa5884426
charset-normalizer==3.1.0 --hash=sha256:21fa558996782fc226b529fdd2ed7866c2c6ec91cee82735c98a197fae39f706
click==8.0.4 --hash=sha256:6a7a62563bbfabfda3a38f3023a1db4a35978c0abd76f6c9605ecd6554d6d9b1
colorama==0.4.6 --hash=sha256:4f1d9991f5acc0ca119f9d443620b77f9d6b33703e51011c16baf57afb285fc6
cython==0.29.33 --hash=sha256:4f88c2dc0653eef6468848eb8022faf64115b39734f750a1c01a7ba7eb04d89f
decorator==5.1.1 --hash=sha256:b8c3f85900b9dc423225913c5aace94729fe1fa9763b38939a95226f02d37186
distlib==0.3.6 --hash=sha256:f35c4b692542ca110de7ef0bea44d73981caeb34ca0b9b6b2e6d7790dda8f80e
editdistance==0.6.2 --hash=sha256:931fb160fd3e741d880f1bef46369993b50a45449e5b9c8f2e753df446c6bba5
exceptiongroup==1.1.1 --hash=sha256:232c37c63e4f682982c8b6459f33a8981039e5fb8756b2074364e5055c498c9e
executing==1.2.0 --hash=sha256:0314a69e37426e3608aada02473b4161d4caf5a4b244d1d0c48072b8fee7bacc
filelock==3.10.0 --hash=sha256:e90b34656470756edf8b19656785c5fea73afa1953f3e1b0d645cef11cab3182
greenlet==2.0.2 --hash=sha256:561091a7be172ab497a3527602d467e2b3fbe75f9e783d8b8ce403fa414f71a6
grpcio==1.51.3 --hash=sha256:f7a0d0bf44438869d307f85a54f25a896ad6b4b0ca12370f76892ad732928d87
h11==0.14.0 --hash=sha256:e3fe4ac4b851c468cc8363d500db52c2ead036020723024a109d37346efaa761
identify==2.5.21 --hash=sha256:69edcaffa8e91ae0f77d397af60f148b6b45a8044b2cc6d99cafa5b04793ff00
idna==3.4 --hash=sha256:90b77e79eaa3eba6de819a0c442c0b4ceefc341a7a2ab77d7562bf49f425c5c2
iniconfig==2.0.0 --hash=sha256:b6a85871a79d2e3b22d2d1b94ac2824226a63c6b741c88f7ae975f18b6778374
itsdangerous==2.1.2 --hash=sha256:2c2349112351b88699d8d4b6b075022c0808887cb7ad10069318a8b0bc88db44
jmespath==1.0.1 --hash=sha256:02e2e4cc71b5bcab88332eebf907519190dd9e6e82107fa7f83b1003a6252980
lxml==4.9.2 --hash=sha256:5b4545b8a40478183ac06c073e81a5ce4cf01bf1734962577cf2bb569a5b3bbf
markupsafe==2.1.2 --hash=sha256:40dfd3fefbef579ee058f139733ac336312663c6706d1163b82b3003fb1925c4
jinja2==3.1.1 --hash=sha256:539835f51a74a69f41b848a9645dbdc35b4f20a3b601e2d9a7e22947b15ff119
mako==1.2.4 --hash=sha256:c97c79c018b9165ac9922ae4f32da095ffd3c4e6872b45eded42926deea46818
monotonic==1.6 --hash=sha256:68687e19a14f11f26d140dd5c86f3dba4bf5df58003000ed467e0e2a69bca96c
more-itertools==9.1.0 --hash=sha256:d2bc7f02446e86a68911e58ded76d6561eea00cddfb2a91e7019bbb586c799f3
mypy-extensions==1.0.0 --hash=sha256:4392f6c0eb8a5668a69e23d168ffa70f0be9ccfd32b5cc2d26a34ae5b844552d
ninja==1.11.1 --hash=sha256:817e2aee2a4d28a708a67bcfba1817ae502c32c6d8ef80e50d63b0f23adf3a08
numpy==1.23.5 --hash=sha256:33161613d2269025873025b33e879825ec7b1d831317e68f4f2f0f84ed14c719
oauthlib==3.2.2 --hash=sha256:8139f29aac13e25d502680e9e19963e83f16838d48a0d71c287fe40e7067fbca
packaging==23.0 --hash=sha256:714ac14496c3e68c99c29b00845f7a2b85f3bb6f1078fd9f72fd20f0570002b2
parso==0.8.3 --hash=sha256:c001d4636cd3aecdaf33cbb40aebb59b094be2a74c556778ef5576c175e19e75
jedi==0.18.2 --hash=sha256:203c1fd9d969ab8f2119ec0a3342e0b49910045abe6af0a3ae83a5764d54639e
pathspec==0.11.1 --hash=sha256:d8af70af76652554bd134c22b3e8a1cc46ed7d91edcdd721ef1a0c51a84a5293
pickleshare==0.7.5 --hash=sha256:9649af414d74d4df115d5d718f82acb59c9d418196b7b4290ed47a12ce62df56
pillow==9.4.0 --hash=sha256:0884ba7b515163a1a05440a138adeb722b8a6ae2c2b33aea93ea3118dd3a899e
platformdirs==3.1.1 --hash=sha256:e5986afb596e4bb5bde29a79ac9061aa955b94fca2399b7aaac4090860920dd8
pluggy==1.0.0 --hash=sha256:74134bbf457f031a36d68416e1509f34bd5ccc019f0bcc952c7b909d06b37bd3
portalocker==2.7.0 --hash=sha256:a07c5b4f3985c3cf4798369631fb7011adb498e2a46d8440efc75a8f29a0f983
protobuf==3.20.2 --hash=sha256:7a5037af4e76c975b88c3becdf53922b5ffa3f2cddf657574a4920a3b33b80f3
psutil==5.9.4 --hash=sha256:54c0d3d8e0078b7666984e11b12b88af2db11d11249a8ac8920dd5ef68a66e08
ptyprocess==0.7.0 --hash=sha256:4b41f3967fce3af57cc7e94b888626c18bf37a083e3651ca8feeb66d492fef35
pexpect==4.8.0 --hash=sha256:0b48a55dcb3c05f3329815901ea4fc1537514d6ba867a152b581d69ae3710937
pure-eval==0.2.2 --hash=sha256:01eaab343580944bc56080ebe0a674b39ec44a945e6d09ba7db3cb8cec289350
pyasn1==0.4.8 --hash=sha256:39c7e2ec30515947ff4e87fb6f456dfc6e84857d34be479c9d4a4ba4bf46aa5d
pyasn1-modules==0.2.8 --hash=sha256:a50b808ffeb97cb3601dd25981f6b016cbb3d31fbf57a8b8a87428e6158d0c74
pycparser==2.21 --hash=sha256:8ee45429555515e1f6b185e78100aea234072576aa43ab53aefcae078162fca9
cffi==1.15.1 --hash=sha256:5d598b938678ebf3c67377cdd45e09d431369c3b1a5b331058c338e201f12b27
cryptography==39.0.2 --hash=sha256:ffd394c7896ed7821a6d13b24657c6a34b6e2650bd84ae063cf11ccffa4f1a97
pygments==2.14.0 --hash=sha256:fa7bd7bd2771287c0de303af8bfdfc731f51bd2c6a47ab69d117138893b82717
pytz==2022.7.1 --hash=sha256:78f4f37d8198e0627c5f1143240bb0206b8691d8d7ac6d78fee88b78733f8c4a
pyyaml==6.0 --hash=sha256:40527857252b61eacd1d9af500c3337ba8deb8fc298940291486c465c8b46ec0
omegaconf==2.1.1 --hash=sha256:be93d73eaa2564fbe52d88ee13e3b79f4c6e04876b2f326551a21391f7dc6367
hydra-core==1.1.2 --hash=sha256:967fff142a44d635d85adf98881a34cb54d2ff6ff2133acc7a14fa87c57adf35
regex==2022.10.31 --hash=sha256:e4f781ffedd17b0b834c8731b75cce2639d5a8afe961c1e58ee7f1f20b3af185
restrictedpython==6.0 --hash=sha256:3479303f7bff48a7dedad76f96e7704993c5e86c5adbd67f607295d5352f0fb8
rsa==4.9 --hash=sha256:90260d9058e514786967344d0ef75fa8727eed8a7d2e43ce9f4bcf1b536174f7
setuptools==67.6.0 --hash=sha256:b78aaa36f6b90a074c1fa651168723acbf45d14cb1196b6f02c0fd07f17623b2
nodeenv==1.7.0 --hash=sha256:27083a7b96a25f2f5e1d8cb4b6317ee8aeda3bdd121394e5ac54e498028a042e
six==1.16.0 --hash=sha256:8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254
asttokens==2.2.1 --hash=sha256:6b0ac9e93fb0335014d382b8fa9b3afa7df546984258005da0b9e7095b3deb1c
google-auth==2.16.2 --hash=sha256:2fef3cf94876d1a0e204afece58bb4d83fb57228aaa366c64045039fda6770a2
isodate==0.6.1 --hash=sha256:0751eece944162659049d35f4f549ed815792b38793f07cf73381c1c87cbed96
python-dateutil==2.8.2 --hash=sha256:961d03dc3453ebbc59dbdea9e4e11c5651520a876d0f4db161e8674aae935da9
sklearn==0.0.post1 --hash=sha256:76b9ed1623775168657b86b5fe966d45752e5c87f528de6240c38923b94147c5
sniffio==1.3.0 --hash=sha256:eecefdce1e5bbfb7ad2eeaabf7c1eeb404d7757c379bd1f7e5cce9d8bf425384
anyio==3.6.2 --hash=sha256:fbbe32bd270d2a2ef3ed1c5d45041250284e31fc0a4df4a5a6071842051a51e3
sqlalchemy==1.4.47 --hash=sha256:6b6d807c76c20b4bc143a49ad47782228a2ac98bdcdcb069da54280e138847fc
stack-data==0.6.2 --hash=sha256:cbb2a53eb64e5785878201a97ed7c7b94883f48b87bfb0bbe8b623c74679e4a8
tabulate==0.9.0 --hash=sha256:024ca478df22e9340661486f85298cff5f6dcdba14f3813e8830015b9ed1948f
sacrebleu==2.3.1 --hash=sha256:352227b8ca9e04ed509266d1fee6c8cff0ea1417c429f8c684645ad2db8b02e7
tensorboard-data-server==0.6.1 --hash=sha256:809fe9887682d35c1f7d1f54f0f40f98bb1f771b14265b453ca051e2ce58fca7
tensorboard-plugin-wit==1.8.1 --hash=sha256:ff26bdd583d155aa951ee3b152b3d0cffae8005dc697f72b44a8e8c2a77a8cbe
termcolor==2.2.0 --hash=sha256:91ddd848e7251200eac969846cbae2dacd7d71c2871e92733289e7e3666f48e7
fire==0.5.0 --hash=sha256:a6b0d49e98c8963910021f92bba66f65ab440da2982b78eb1bbf95a0a34aacc6
timeout-decorator==0.5.0 --hash=sha256:6a2f2f58db1c5b24a2cc79de6345760377ad8bdc13813f5265f6c3e63d16b3d7
tokenizers==0.13.2 --hash=sha256:b3e306b0941ad35087ae7083919a5c410a6b672be0343609d79a1171a364ce79
tomli==2.0.1 --hash=sha256:939de3e7a6161af0c887ef91b7d41a53e7c5a1ca976325f429cb46ea9bc30ecc
pytest==7.2.2 --hash=sha256:130328f552dcfac0b1cec75c12e3f005619dc5f874f0a06e8ff7263f0ee6225e
pytest-datadir==1.4.1 --hash=sha256:095f441782b1b907587eca7227fdbae94be43f1c96b4b2cbcc6801a4645be1af
pytest-regressions==2.4.2 --hash=sha256:b47f92c39d5dd2faa90716ee74c584d705c08e14f435a947f67706c4e5b8ef9a
tqdm==4.65.0 --hash=sha256:c4f53a17fe37e132815abceec022631be8ffe1b9381c2e6e30aa70edc99e9671
traitlets==5.9.0 --hash=sha256:9e6ec080259b9a5940c797d58b613b5e31441c2257b87c2e795c5228ae80d2d8
matplotlib-inline==0.1.6 --hash=sha256:f1f41aab5328aa5aaea9b16d083b128102f8712542f819fe7e6a420ff581b311
typing-extensions==4.5.0 --hash=sha256:fb33085c39dd998ac16d1431ebc293a8b3eedd00fd4a32de0ff79002c19511b4
alembic==1.10.2 --hash=sha256:8b48368f6533c064b39c024e1daba15ae7f947eac84185c28c06bbe1301a5497
black==22.3.0 --hash=sha256:6ee227b696ca60dd1c507be80a6bc849a5a6ab57ac7352aad1ffec9e8b805f21
mypy==1.1.1 --hash=sha256:9401e33814cec6aec8c03a9548e9385e0e228fc1b8b0a37b9ea21038e64cdd8a
pydantic==1.10.6 --hash=sha256:4c19eb5163167489cb1e0161ae9220dadd4fc609a42649e7e84a8fa8fff7a80f
starlette==0.26.1 --hash=sha256:e87fce5d7cbdde34b76f0ac69013fd9d190d581d80681493016666e6f96c6d5e
fastapi==0.95.0 --hash=sha256:daf73bbe844180200be7966f68e8ec9fd8be57079dff1bacb366db32729e6eb5
urllib3==1.26.15 --hash=sha256:aa751d169e23c7479ce47a0cb0da579e3ede798f994f5816a74e4f4500dcea42
botocore==1.29.95 --hash=sha256:5f5f1c8125f8c331f561ca0a7a892f709df206714c306c48fd907eee469926cb
requests==2.28.2 --hash=sha256:64299f4909223da747622c030b781c0d7811e359c37124b4bd368fb8c6518baa
azure-core==1.26.3 --hash=sha256:f7bad0a7b4d800d6e73733ea7e13a616016221ac111ff9a344fe4cba41e51bbe
azure-storage-blob==12.15.0 --hash=sha256:08d8807c577c63a436740627927c1a03a97c963efc29af5c818aed906590e1cf
requests-oauthlib==1.3.1 --hash=sha256:2577c501a2fb8d05a304c09d090d6e47c306fef15809d102b327cf8364bddab5
google-auth-oauthlib==0.4.6 --hash=sha256:3f2a6e802eebbb6fb736a370fbf3b055edcb6b52878bf2f26330b5e041316c73
s3transfer==0.6.0 --hash=sha256:06176b74f3a15f61f1b4f25a1fc29a4429040b7647133a463da8fa5bd28d5ecd
boto3==1.26.95 --hash=sha256:2f07523d45da7a970d18037676e1fb78401ce3f44f4cc26a6a991be8c519b62b
segment-analytics-python==2.2.2 --hash=sha256:363ea1679d14adb13c582eac1edd78c0d397d5dcc17fcea6376b66ba04032663
uvicorn==0.21.1 --hash=sha256:e47cac98a6da10cd41e6fd036d472c6f58ede6c5dbee3dbee3ef7a100ed97742
virtualenv==20.21.0 --hash=sha256:31712f8f2a17bd06234fa97fdf19609e789dd4e3e4bf108c3da71d710651adbc
pre-commit==3.2.0 --hash=sha256:f712d3688102e13c8e66b7d7dbd8934a6dda157e58635d89f7d6fecdca39ce8a
wcwidth==0.2.6 --hash=sha256:795b138f6875577cd91bba52baf9e445cd5118fd32723b460e30a0af30ea230e
prompt-toolkit==3.0.38 --hash=sha256:45ea77a2f7c60418850331366c81cf6b5b9cf4c7fd34616f733c5427e6abbb1f
ipython==8.11.0 --hash=sha256:5b54478e459155a326bf5f42ee4f29df76258c0279c36f21d71ddb560f88b156
ipdb==0.13.13 --hash=sha256:45529994741c4ab6d2388bfa5d7b725c2cf7fe9deffabdb8a6113aa5ed449ed4
werkzeug==2.2.3 --hash=sha256:56433961bc1f12533306c624f3be5e744389ac61d722175d543e1751285da612
wheel==0.40.0 --hash=sha256:d236b20e7cb522daf2390fa84c55eea81c5c30190f90f29ae2ca1ad8355bf247
xmltodict==0.13.0 --hash=sha256:aa89e8fd76320154a40d19a0df04a4695fb9dc5ba977cbb68ab3e4eb225e7852
py3nvml==0.2.7 --hash=sha256:30101170d1f51419c8d21fd8ca6cdc333a552b4f8a945c2fc7d107d77e4220dd
aim==3.16.2 --hash=sha256:8648eb3f3a848fc88a91590c1dea3d2905326b2f708a155d3b72442f8c593cc0
zipp==3.15.0 --hash=sha256:48904fc76a60e542af151aded95726c1a5c34ed43ab4134b597665c86d7ad556
importlib-metadata==6.1.0 --hash=sha256:ff80f3b5394912eb1b108fcfd444dc78b7f1f3e16b16188054bd01cb9cb86f09
flask==2.1.1 --hash=sha256:8a4cf32d904cf5621db9f0c9fbcd7efabf3003f22a04e4d0ce790c7137ec5264
markdown==3.4.1 --hash=sha256:08fb8465cffd03d10b9dd34a5c3fea908e20391a2a90b88d66362cb05beed186
tensorboard==2.8.0 --hash=sha256:65a338e4424e9079f2604923bdbe301792adce2ace1be68da6b3ddf005170def
ENVBUILD_EOF_705558b1c40c
  env SKLEARN_ALLOW_DEPRECATED_SKLEARN_PACKAGE_INSTALL=True /mnt/envbuild/envs/opt-175b-azure/bin/python -m pip install --no-input --disable-pip-version-check -r /mnt/envbuild/envs/opt-175b-azure/.envbuild/requirements/pip-packages.txt --require-hashes --no-deps
}

# step git:apex: apex @ e2083df5eb96
# why: The guide clones Apex master unpinned. e2083df5 is metaseq's own pin at a1a4e733 and 5ca60055
# why: (docs/Dockerfile with torch 1.10.1+cu113, CI with torch 1.9.1+cu111: "because of apex issue
# why: #1252 we need to pin"). --deprecated_fused_adam builds fused_adam_cuda, which metaseq's
# why: optim/fused_adam.py imports first; --xentropy and --fast_multihead_attn are the guide's flags
# why: (the latter fetches the cutlass submodule at build time).
step_git_apex() {
  /mnt/envbuild/envs/opt-175b-azure/bin/python "$FILES/envbuild_node" "$FILES/actions/git-apex.json"
}

# step patch:apex-cuda-check: patch apex-cuda-check
# why: patched: nvcc 11.4 and torch's CUDA 11.3 differ only in the minor version; Apex's setup.py
# why: demands an exact match (major and minor since 2019-05, 50689f6a / NVIDIA/apex#323; exact
# why: packaging Version objects since 2022-10, 5f1a73ec) although torch's BuildExtension only warns on
# why: a minor mismatch. Relaxing the check to the major (a major mismatch still raises)
step_patch_apex_cuda_check() {
  /mnt/envbuild/envs/opt-175b-azure/bin/python "$FILES/envbuild_node" "$FILES/actions/patch-apex-cuda-check.json"
}

# step apex:apex: build Apex wheel (apex)
# why: Apex before pyproject.toml: build the wheel with `python setup.py bdist_wheel` in the tree
# why: (needs the wheel package and the installed torch), then pip install the wheel; 1 extension(s) x
# why: 96 job(s) x 1 nvcc thread(s) = 96 concurrent nvcc at ~3 GiB each within 1615 of 1900 GiB,
# why: keeping 285 GiB headroom (96 cores, 1 GPU arch(s); NVIDIA/apex#1882)
step_apex_apex() {
  env MAX_JOBS="$(( $(nproc) < 96 ? $(nproc) : 96 ))" /mnt/envbuild/envs/opt-175b-azure/bin/python "$FILES/envbuild_node" "$FILES/actions/wheel-apex-e2083df5eb96-0acf9a42ea143f13fc81.json"
  /mnt/envbuild/envs/opt-175b-azure/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-index --force-reinstall --find-links=/mnt/envbuild/envs/opt-175b-azure/.envbuild/wheels/apex-e2083df5eb96-0acf9a42ea143f13fc81 apex
}

# step git:megatron: megatron @ fa6c0860b62e
# why: The guide's Megatron fork and branch. No snapshot of fairseq_v3 exists to read its head;
# why: fa6c0860 is the best-evidenced fairseq_v3 commit (metaseq's 2023 port of these files cites it,
# why: and a third-party Dockerfile checks it out after cloning --branch fairseq_v3). Pinned so the
# why: build is repeatable; `envbuild lock` verifies it against the mirror. Editable because fused
# why: kernels JIT-compile into megatron/fused_kernels/build.
step_git_megatron() {
  /mnt/envbuild/envs/opt-175b-azure/bin/python "$FILES/envbuild_node" "$FILES/actions/git-megatron.json"
}

# step install:megatron: install megatron (editable)
# why: editable install: the tree stays writable (JIT kernels build into it)
step_install_megatron() {
  /mnt/envbuild/envs/opt-175b-azure/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-build-isolation -e /mnt/envbuild/envs/opt-175b-azure/src/megatron
}

# step git:metaseq: metaseq @ 5ca6005552b7
# why: The guide pins a1a4e733 (2022-08-09, "Do not save checkpoint in benchmark mode"), which predates
# why: metaseq's switch to Megatron fairseq_v3. 5ca60055 (2022-10-28, PR #460) is the commit that
# why: switches to fairseq_v3; it is 88 commits after a1a4e733 and contains it (checked by
# why: requires_ancestors). Between them --benchmark stopped implying --no-save (e3ea5070, 2022-09-16:
# why: save intervals of 0 instead) and training saves checkpoint_last when it stops (43815b8,
# why: 2022-09-29), so a benchmark run leaves a checkpoint the next run would resume from:
# why: benchmark.fresh removes it before each run. Its CI builds it with the same Apex e2083df5.
# why: build_ext --inplace puts the Cython .so files in the tree, which opt-baselines' code snapshot
# why: copies. install_requires lists `sklearn`, which needs the brownout variable to install.
step_git_metaseq() {
  /mnt/envbuild/envs/opt-175b-azure/bin/python "$FILES/envbuild_node" "$FILES/actions/git-metaseq.json"
}

# step build:metaseq: build metaseq
# why: published build step for metaseq
step_build_metaseq() {
  (cd /mnt/envbuild/envs/opt-175b-azure/src/metaseq && env SKLEARN_ALLOW_DEPRECATED_SKLEARN_PACKAGE_INSTALL=True PATH=/mnt/envbuild/envs/opt-175b-azure/bin:"$PATH" bash -ec 'python setup.py build_ext --inplace')
}

# step install:metaseq: install metaseq (editable)
# why: editable install: the tree stays writable (JIT kernels build into it)
step_install_metaseq() {
  /mnt/envbuild/envs/opt-175b-azure/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-build-isolation -e /mnt/envbuild/envs/opt-175b-azure/src/metaseq
}

# step git:fairscale: fairscale @ 191553190d73
# why: The guide's branch, installed non-editable as the guide says. Head 19155319 (2022-05-11) =
# why: v0.4.6 + 5 commits; reports version 0.4.6 either way (the version tuple is tracked), which
# why: satisfies metaseq's string comparisons in trainer.py.
step_git_fairscale() {
  /mnt/envbuild/envs/opt-175b-azure/bin/python "$FILES/envbuild_node" "$FILES/actions/git-fairscale.json"
}

# step install:fairscale: install fairscale (wheel)
# why: non-editable install, as the published instructions require
step_install_fairscale() {
  /mnt/envbuild/envs/opt-175b-azure/bin/python -m pip install --no-input --disable-pip-version-check --no-deps --no-build-isolation /mnt/envbuild/envs/opt-175b-azure/src/fairscale
}

# step env-file: Environment file
# why: recipe and node-type variables (e.g. NCCL/UCX on Azure ND96)
step_env_file() {
  mkdir -p /mnt/envbuild/envs/opt-175b-azure/.envbuild && cat > /mnt/envbuild/envs/opt-175b-azure/.envbuild/env.sh <<'ENVBUILD_EOF_cd472e0bf75e' && chmod 0644 /mnt/envbuild/envs/opt-175b-azure/.envbuild/env.sh
# written by envbuild; source it before running the recipe
export VIRTUAL_ENV=/mnt/envbuild/envs/opt-175b-azure
export PATH=/mnt/envbuild/envs/opt-175b-azure/bin:"$PATH"
export CUDA_DEVICE_ORDER=PCI_BUS_ID
export NCCL_IB_PCI_RELAXED_ORDERING=1
export NCCL_SOCKET_IFNAME=eth0
export NCCL_TOPO_FILE=/opt/microsoft/ndv4-topo.xml
export OMPI_MCA_coll_hcoll_enable=0
export PIP_CACHE_DIR=/mnt/.cache/pip
export TMPDIR=/mnt/tmp
export UCX_IB_PCI_RELAXED_ORDERING=on
export UCX_NET_DEVICES=eth0
ENVBUILD_EOF_cd472e0bf75e
}

# step import-check: Import check
# why: fail now, not at the first training step
step_import_check() {
  /mnt/envbuild/envs/opt-175b-azure/bin/python -c "import importlib, sys
for m in sys.argv[1:]:
    mod = importlib.import_module(m)
    print(m, getattr(mod, '__version__', ''))" torch apex amp_C fused_adam_cuda xentropy_cuda megatron fairscale metaseq
}

# step smoke: Smoke benchmark
# why: prove the environment trains
step_smoke() {
  failed=''
  mkdir -p /mnt/envbuild/envs/opt-175b-azure/.envbuild/smoke
  mkdir -p /mnt/envbuild/envs/opt-175b-azure/.envbuild/smoke && cp "$FILES/assets/smoke/gpt.py" /mnt/envbuild/envs/opt-175b-azure/.envbuild/smoke/gpt.py && chmod 0644 /mnt/envbuild/envs/opt-175b-azure/.envbuild/smoke/gpt.py
  mkdir -p /mnt/envbuild/envs/opt-175b-azure/.envbuild/smoke && cp "$FILES/assets/smoke/collective.py" /mnt/envbuild/envs/opt-175b-azure/.envbuild/smoke/collective.py && chmod 0644 /mnt/envbuild/envs/opt-175b-azure/.envbuild/smoke/collective.py
  mkdir -p /mnt/envbuild/envs/opt-175b-azure/.envbuild/smoke && cp "$FILES/assets/smoke/apex_check.py" /mnt/envbuild/envs/opt-175b-azure/.envbuild/smoke/apex_check.py && chmod 0644 /mnt/envbuild/envs/opt-175b-azure/.envbuild/smoke/apex_check.py
  /mnt/envbuild/envs/opt-175b-azure/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-gpt.json" || failed="$failed gpt(exit $?)"
  /mnt/envbuild/envs/opt-175b-azure/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-collective.json" || failed="$failed collective(exit $?)"
  /mnt/envbuild/envs/opt-175b-azure/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-apex.json" || failed="$failed apex(exit $?)"
  /mnt/envbuild/envs/opt-175b-azure/bin/python "$FILES/envbuild_node" "$FILES/actions/capture-native.json" || failed="$failed native(exit $?)"
  if [ -n "$failed" ]; then echo "smoke failed:$failed" >&2; exit 1; fi
}

STEPS=(preflight environment pip-tooling pip:torch pip:packages git:apex patch:apex-cuda-check apex:apex git:megatron install:megatron git:metaseq build:metaseq install:metaseq git:fairscale install:fairscale env-file import-check smoke)
if [ "$#" -gt 0 ]; then STEPS=("$@"); fi
n=0
for id in "${STEPS[@]}"; do
  n=$((n + 1))
  fn="step_${id//[^a-zA-Z0-9]/_}"
  if ! declare -F "$fn" >/dev/null; then echo "no step $id" >&2; exit 2; fi
  echo "==> [$n/${#STEPS[@]}] $id"
  "$fn"
done
echo "==> done"
