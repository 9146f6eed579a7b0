//! Installing a snapshot received from the leader into a [`GroupStateMachine`] (the module
//! docs of [`super`]).

use std::io;

use tokio::io::AsyncSeekExt;

use super::{load_checked, sm_read_err, sm_write_err, snapshot_err, GroupStateMachine};
use crate::consensus::restore::{blocking, restore};
use crate::consensus::snapshot::{self, SnapshotFile};
use crate::consensus::types::{SnapshotMeta, StorageError};

impl GroupStateMachine {
    /// A file to receive a snapshot from the leader into.
    pub(super) async fn begin_receiving(&mut self) -> Result<Box<SnapshotFile>, StorageError> {
        let path = self
            .snapshots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .temp_path("receive");
        let file = SnapshotFile::create(&path).await.map_err(snapshot_err)?;
        Ok(Box::new(file))
    }

    /// Install a snapshot received from the leader (module docs).
    pub(super) async fn install(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<SnapshotFile>,
    ) -> Result<(), StorageError> {
        tracing::info!(
            group = self.group,
            last_log = ?meta.last_log_id,
            "installing a snapshot received from the leader"
        );
        let mut data = *snapshot;
        let owned = self
            .snapshots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .owns_temp(data.path());
        let temp = if owned {
            data.sync().await.map_err(snapshot_err)?;
            data.path().to_path_buf()
        } else {
            // Not one of our receive files (e.g. handed over in-process): copy it in.
            let temp = self
                .snapshots
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .temp_path("receive");
            let mut source = data.into_file();
            source
                .seek(io::SeekFrom::Start(0))
                .await
                .map_err(snapshot_err)?;
            let mut copy = SnapshotFile::create(&temp).await.map_err(snapshot_err)?;
            tokio::io::copy(&mut source, &mut copy)
                .await
                .map_err(snapshot_err)?;
            copy.sync().await.map_err(snapshot_err)?;
            temp
        };
        let expected = meta.clone();
        let snapshots = self.snapshots.clone();
        let (meta, path) = blocking(move || {
            let header = snapshot::verify(&temp)?;
            if header.last_log_id != expected.last_log_id
                || header.last_membership != expected.last_membership
            {
                let _ = std::fs::remove_file(&temp);
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "snapshot file is at {:?}, openraft installs {:?}",
                        header.last_log_id, expected.last_log_id
                    ),
                ));
            }
            snapshots
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .commit(&temp, expected)
        })
        .await
        .map_err(snapshot_err)?;
        // The group's queued batches land before its keys are replaced, never after.
        let db = self.db.clone();
        blocking(move || db.writer().flush_all().map_err(io::Error::other))
            .await
            .map_err(sm_write_err)?;
        let import = self
            .machine
            .stored_value_import(&self.view)
            .map_err(sm_read_err)?;
        restore(self.db.tree().clone(), self.group, path, import)
            .await
            .map_err(sm_write_err)?;
        self.applied = meta.last_log_id;
        self.membership = meta.last_membership;
        // The restore cleared the in-place mark: the received file is the current snapshot.
        self.in_place = None;
        self.growth.snapshot_taken();
        load_checked(self.machine.as_mut(), &self.view).map_err(sm_read_err)?;
        Ok(())
    }
}
