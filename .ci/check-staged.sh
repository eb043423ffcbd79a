#!/usr/bin/env bash
# Checks that a Maven repository folder (the release profile's target/staging, or the private
# repository the consumer build installs into) holds everything Maven Central requires of each
# artifact in .ci/published-artifacts, except signatures: a POM with name, description, url,
# license, developer and scm (inherited from the parent POM where Maven inherits them), and for a
# jar module the main jar (with a module-info.class naming an io.github.djlamp module), a sources
# jar, a javadoc jar, and a line in the staged BOM; and the BOM's DJL and PyTorch versions must be
# the parent's.
# Usage: check-staged.sh REPOSITORY_FOLDER VERSION [LIST]. Lists every missing piece, then fails.
set -euo pipefail
repo=$1
version=$2
list=${3:-"$(dirname "$0")/published-artifacts"}
group_path=io/github/djlamp
missing=()

newest() { # newest file in $1 matching glob $2 (a deployed SNAPSHOT carries a timestamp)
  local f
  f=$(find "$1" -maxdepth 1 -name "$2" 2>/dev/null | sort | tail -n 1)
  printf '%s' "$f"
}
project_level() { # the POM without nested blocks, so that <name> is the project's own
  sed -e '/<parent>/,/<\/parent>/d' -e '/<licenses>/,/<\/licenses>/d' \
    -e '/<developers>/,/<\/developers>/d' -e '/<contributors>/,/<\/contributors>/d' \
    -e '/<organization>/,/<\/organization>/d' -e '/<issueManagement>/,/<\/issueManagement>/d' \
    -e '/<scm[ >]/,/<\/scm>/d' -e '/<dependencyManagement>/,/<\/dependencyManagement>/d' \
    -e '/<dependencies>/,/<\/dependencies>/d' -e '/<build>/,/<\/build>/d' \
    -e '/<profiles>/,/<\/profiles>/d' -e '/<modules>/,/<\/modules>/d' "$1"
}
block() { # the text of block <$2> in POM $1
  sed -n "/<$2[ >]/,/<\/$2>/p" "$1"
}
pom_has() { # pom, parent pom (may be empty), description of the field, test function
  local pom=$1 parent=$2 what=$3 test=$4
  if $test "$pom"; then return 0; fi
  if [[ -n $parent ]] && $test "$parent"; then return 0; fi
  missing+=("$pom: no $what")
}
has_name() { project_level "$1" | grep -q '<name>[^<]'; }
has_description() { project_level "$1" | grep -q '<description>[^<]'; }
has_url() { project_level "$1" | grep -q '<url>https\?://'; }
has_license() { block "$1" license | grep -q '<name>[^<]' && block "$1" license | grep -q '<url>https\?://'; }
has_developer() { block "$1" developer | grep -q '<name>[^<]'; }
has_scm() { block "$1" scm | grep -q '<connection>scm:' && block "$1" scm | grep -q '<url>https\?://'; }

checked=0
while read -r artifact packaging; do
  [[ -z ${artifact:-} || $artifact == \#* ]] && continue
  checked=$((checked + 1))
  dir=$repo/$group_path/$artifact/$version
  pom=$(newest "$dir" "$artifact-*.pom")
  if [[ -z $pom ]]; then
    missing+=("$dir: no $artifact POM")
    continue
  fi
  parent=
  parent_id=$(block "$pom" parent | sed -n 's:.*<artifactId>\(.*\)</artifactId>.*:\1:p')
  if [[ -n $parent_id ]]; then
    parent=$(newest "$repo/$group_path/$parent_id/$version" "$parent_id-*.pom")
    [[ -z $parent ]] && missing+=("$pom: its parent $parent_id is not staged")
  fi
  pom_has "$pom" "" "<name>" has_name
  pom_has "$pom" "$parent" "<description>" has_description
  pom_has "$pom" "$parent" "<url>" has_url
  pom_has "$pom" "$parent" "<license> with name and url" has_license
  pom_has "$pom" "$parent" "<developer> with a name" has_developer
  pom_has "$pom" "$parent" "<scm> with connection and url" has_scm
  [[ $packaging == jar ]] || continue
  bom=$(newest "$repo/$group_path/djl-amp-bom/$version" "djl-amp-bom-*.pom")
  if [[ -n $bom ]] && ! block "$bom" dependencyManagement | grep -q "<artifactId>$artifact</artifactId>"; then
    missing+=("$bom: does not list $artifact")
  fi
  main=$(find "$dir" -maxdepth 1 -name "$artifact-*.jar" ! -name '*-sources.jar' ! -name '*-javadoc.jar' \
    2>/dev/null | sort | tail -n 1)
  sources=$(newest "$dir" "$artifact-*-sources.jar")
  javadoc=$(newest "$dir" "$artifact-*-javadoc.jar")
  if [[ -z $main ]]; then
    missing+=("$dir: no main jar")
  elif ! jar --describe-module --file "$main" 2>/dev/null \
      | grep -q '^io\.github\.djlamp\.[a-z.]*\(@[^ ]*\)\? .*!/module-info\.class$'; then
    # without one, the module name would be derived from the file name (amp.core)
    missing+=("$main: no module-info.class naming an io.github.djlamp module")
  fi
  if [[ -z $sources ]]; then
    missing+=("$dir: no sources jar")
  elif ! jar tf "$sources" | grep -q '\.java$'; then
    missing+=("$sources: holds no .java file")
  fi
  if [[ -z $javadoc ]]; then
    missing+=("$dir: no javadoc jar")
  elif ! jar tf "$javadoc" | grep -q '^index\.html$'; then
    missing+=("$javadoc: holds no index.html")
  fi
done <"$list"

# the BOM has no parent on purpose and repeats the parent's DJL and PyTorch versions: they must agree
bom=$(newest "$repo/$group_path/djl-amp-bom/$version" "djl-amp-bom-*.pom")
parent=$(newest "$repo/$group_path/djl-amp-parent/$version" "djl-amp-parent-*.pom")
if [[ -n $bom && -n $parent ]]; then
  for property in djl.version pytorch.version; do
    in_bom=$(sed -n "s:.*<$property>\(.*\)</$property>.*:\1:p" "$bom" | head -n 1)
    in_parent=$(sed -n "s:.*<$property>\(.*\)</$property>.*:\1:p" "$parent" | head -n 1)
    if [[ $in_bom != "$in_parent" ]]; then
      missing+=("$bom: $property is '$in_bom', the parent builds with '$in_parent'")
    fi
  done
fi

if ((checked == 0)); then
  missing+=("$list: lists no artifact")
fi
if ((${#missing[@]} > 0)); then
  echo "Staged repository $repo is incomplete for Maven Central:" >&2
  printf '  missing: %s\n' "${missing[@]}" >&2
  exit 1
fi
echo "Staged repository $repo: all $checked artifacts of $list are complete for Maven Central (signatures aside)."
